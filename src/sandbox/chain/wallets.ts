import { closeSync, existsSync, fsyncSync, openSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  type Abi,
  type Address,
  type Chain,
  type ContractFunctionArgs,
  type ContractFunctionName,
  createWalletClient,
  type Hash,
  type HDAccount,
  type Hex,
  type PublicClient,
  type TransactionReceipt,
  type Transport,
} from 'viem';
import { english, generateMnemonic, mnemonicToAccount } from 'viem/accounts';
import { createKeyedLock } from '../keyed-lock.ts';
import { TransactionFailedError } from './errors.ts';

const MNEMONIC_FILE = 'wallet.mnemonic';
/** A local chain mines at once; a public testnet within a few blocks. */
const RECEIPT_TIMEOUT_MS = 60_000;

/** HD indexes (m/44'/60'/0'/0/i) of the sandbox's own accounts; agents start at 1000. */
export const ACCOUNT_INDEX = { treasury: 0, faucet: 1, firstAgent: 1000 } as const;

/**
 * The sandbox's HD mnemonic, created on first use in `<stateDir>/wallet.mnemonic` (0600).
 * Every server-side wallet derives from it. No endpoint ever returns it.
 */
export function loadOrCreateMnemonic(stateDir: string): string {
  const path = join(stateDir, MNEMONIC_FILE);
  if (existsSync(path)) return readFileSync(path, 'utf8').trim();
  const mnemonic = generateMnemonic(english, 256);
  const fd = openSync(path, 'wx', 0o600);
  try {
    writeFileSync(fd, `${mnemonic}\n`);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  return mnemonic;
}

/** Derives accounts once each: every derivation runs PBKDF2 over the mnemonic. */
export function createKeyring(mnemonic: string): (index: number) => HDAccount {
  const accounts = new Map<number, HDAccount>();
  return (index) => {
    let account = accounts.get(index);
    if (!account) {
      account = mnemonicToAccount(mnemonic, { addressIndex: index });
      accounts.set(index, account);
    }
    return account;
  };
}

/** A contract call or a plain ETH transfer, with a label for error messages. */
export type TxRequest =
  | {
      label: string;
      address: Address;
      abi: Abi;
      functionName: string;
      args?: readonly unknown[];
      value?: bigint;
    }
  | { label: string; to: Address; value: bigint }
  | { label: string; deploy: { abi: Abi; bytecode: Hex; args: readonly unknown[] } };

/** Sends inside `exclusive`: each resolves with a receipt whose status is success. */
export interface WalletSession {
  address: Address;
  send(request: TxRequest): Promise<TransactionReceipt>;
  /** Sends several back to back (consecutive nonces), then waits for every receipt. */
  sendAll(requests: TxRequest[]): Promise<TransactionReceipt[]>;
}

export interface ServerWallet {
  address: Address;
  /**
   * Runs `work` with this wallet to itself: sends from one wallet never interleave, so
   * nonces have no gaps and an approve is never spent by another request's deposit.
   */
  exclusive<T>(work: (session: WalletSession) => Promise<T>): Promise<T>;
}

type ContractWrite = {
  address: Address;
  abi: Abi;
  functionName: ContractFunctionName<Abi, 'nonpayable' | 'payable'>;
  args?: ContractFunctionArgs<Abi, 'nonpayable' | 'payable'>;
};

/**
 * A server-side wallet: signs locally with its HD key and keeps its own nonce, which is
 * re-read from the chain after any failed send.
 */
export function createServerWallet(
  account: HDAccount,
  publicClient: PublicClient<Transport, Chain>,
): ServerWallet {
  const walletClient = createWalletClient({
    account,
    chain: publicClient.chain,
    transport: () => publicClient.transport as never,
  });
  const lock = createKeyedLock();
  let nextNonce: number | undefined;

  async function broadcast(request: TxRequest): Promise<Hash> {
    const nonce =
      nextNonce ??
      (await publicClient.getTransactionCount({ address: account.address, blockTag: 'pending' }));
    try {
      let hash: Hash;
      if ('to' in request) {
        hash = await walletClient.sendTransaction({ to: request.to, value: request.value, nonce });
      } else if ('deploy' in request) {
        hash = await walletClient.deployContract({ ...request.deploy, nonce } as never);
      } else {
        const call = request as unknown as ContractWrite;
        // Headroom over the estimate: gas can depend on the block's timestamp (a vault
        // mints accrued yield only once some has accrued), which moves between the
        // estimate and the block the transaction lands in.
        const estimate = await publicClient.estimateContractGas({
          ...call,
          account,
        } as never);
        hash = await walletClient.writeContract({
          ...call,
          nonce,
          gas: estimate + estimate / 2n,
        } as never);
      }
      nextNonce = nonce + 1;
      return hash;
    } catch (error) {
      nextNonce = undefined;
      throw TransactionFailedError.from(request.label, error);
    }
  }

  async function confirm(label: string, hash: Hash): Promise<TransactionReceipt> {
    let receipt: TransactionReceipt;
    try {
      receipt = await publicClient.waitForTransactionReceipt({ hash, timeout: RECEIPT_TIMEOUT_MS });
    } catch (error) {
      nextNonce = undefined;
      throw TransactionFailedError.from(label, error, hash);
    }
    if (receipt.status !== 'success') {
      nextNonce = undefined;
      throw new TransactionFailedError(label, 'the transaction reverted', hash);
    }
    return receipt;
  }

  const session: WalletSession = {
    address: account.address,
    send: async (request) => confirm(request.label, await broadcast(request)),
    async sendAll(requests) {
      const hashes: Hash[] = [];
      for (const request of requests) hashes.push(await broadcast(request));
      return Promise.all(
        hashes.map((hash, i) => confirm(requests[i]?.label ?? 'transaction', hash)),
      );
    },
  };

  return {
    address: account.address,
    exclusive: (work) => lock(account.address, () => work(session)),
  };
}
