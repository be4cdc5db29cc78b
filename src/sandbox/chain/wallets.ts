import { createHash, pbkdf2Sync } from 'node:crypto';
import { closeSync, existsSync, fsyncSync, openSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { validateMnemonic } from '@scure/bip39';
import { wordlist } from '@scure/bip39/wordlists/english';
import {
  type Abi,
  type Address,
  type Chain,
  encodeDeployData,
  encodeFunctionData,
  type Hex,
  keccak256,
  type LocalAccount,
  type PublicClient,
  type TransactionReceipt,
  type Transport,
  toHex,
} from 'viem';
import { english, generateMnemonic, HDKey, privateKeyToAccount } from 'viem/accounts';
import { HttpError, StartupError } from '../errors.ts';
import { createKeyedLock } from '../keyed-lock.ts';
import type { StoreTx } from '../store/index.ts';
import { StaleNonceError, TransactionFailedError } from './errors.ts';
import type { SignedTx, Submitted, TxSubmitter } from './producer.ts';

const MNEMONIC_FILE = 'wallet.mnemonic';

/** HD indexes (m/44'/60'/0'/0/i) of the treasury and faucet on a chain the sandbox does not own. */
export const ACCOUNT_INDEX = { treasury: 0, faucet: 1 } as const;

export function mnemonicPath(stateDir: string): string {
  return join(stateDir, MNEMONIC_FILE);
}

/**
 * Creates the sandbox's HD mnemonic in `<stateDir>/wallet.mnemonic` (0600), once, when the
 * state is new. Every agent's server-side wallet derives from it. No endpoint returns it.
 */
export function createMnemonic(stateDir: string, given?: string): string {
  const mnemonic = given ?? generateMnemonic(english, 256);
  const fd = openSync(mnemonicPath(stateDir), 'wx', 0o600);
  try {
    writeFileSync(fd, `${mnemonic}\n`);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  return mnemonic;
}

/** Reads wallet.mnemonic; undefined when there is none, an error naming the file when it is bad. */
export function readMnemonic(stateDir: string): string | undefined {
  const path = mnemonicPath(stateDir);
  if (!existsSync(path)) return undefined;
  const mnemonic = readFileSync(path, 'utf8').trim().split(/\s+/).join(' ');
  if (!validateMnemonic(mnemonic, wordlist)) {
    throw new StartupError(
      `${path} does not hold a valid BIP-39 mnemonic; restore the file from a backup of this state directory`,
    );
  }
  return mnemonic;
}

/** Identifies a mnemonic without revealing it, so the database can tell if it was swapped. */
export function mnemonicFingerprint(mnemonic: string): string {
  return createHash('sha256').update(`agentctl wallet.mnemonic\n${mnemonic}`).digest('hex');
}

/**
 * The BIP-39 seed of a mnemonic without passphrase: PBKDF2-HMAC-SHA512 of the NFKD-normalised
 * phrase, salt "mnemonic", 2048 rounds, 64 bytes (what @scure/bip39's mnemonicToSeedSync
 * computes), with Node's native PBKDF2, which takes 1 ms where the pure-JS one takes 70.
 */
export function mnemonicSeed(mnemonic: string): Uint8Array {
  return pbkdf2Sync(mnemonic.normalize('NFKD'), 'mnemonic', 2048, 64, 'sha512');
}

/** Derives accounts from the mnemonic's seed, which is computed once (PBKDF2 is slow). */
export function createKeyring(mnemonic: string): (index: number) => LocalAccount {
  const accounts = new Map<number, LocalAccount>();
  let parent: HDKey | undefined;
  return (index) => {
    let account = accounts.get(index);
    if (!account) {
      // m/44'/60'/0'/0/index, as mnemonicToAccount derives it; the parent node is shared.
      parent ??= HDKey.fromMasterSeed(mnemonicSeed(mnemonic)).derive("m/44'/60'/0'/0");
      const child = parent.deriveChild(index);
      account = privateKeyToAccount(toHex(child.privateKey as Uint8Array));
      accounts.set(index, account);
    }
    return account;
  };
}

/**
 * The sandbox's own accounts on its own chain (treasury and faucet), fixed so that the
 * genesis checkpoint built at build time is the same for every sandbox. Their keys are
 * public, like anvil's dev accounts: anyone who can reach the RPC URL can rewrite the chain
 * anyway. On any other chain, these accounts come from the state's mnemonic instead.
 */
export const GENESIS_KEYS = {
  treasury: keccak256(toHex('agentctl sandbox treasury')),
  faucet: keccak256(toHex('agentctl sandbox faucet')),
} as const;

/** A contract call, a plain ETH transfer or a deployment, with a label for error messages. */
export type TxRequest = (
  | {
      label: string;
      address: Address;
      abi: Abi;
      functionName: string;
      args?: readonly unknown[];
      value?: bigint;
    }
  | { label: string; to: Address; value: bigint }
  | { label: string; deploy: { abi: Abi; bytecode: Hex; args: readonly unknown[] } }
) & {
  /**
   * Gas limit. Without it the gas is estimated, which also refuses a call that would revert
   * before anything is sent. Give it for a call that depends on an earlier one of the same
   * send (a deposit after its approve), which cannot be estimated before that one is mined.
   */
  gas?: bigint;
};

/** Fees for every transaction: fixed on the sandbox's own chain, estimated elsewhere. */
export type FeePolicy = { maxFeePerGas: bigint; maxPriorityFeePerGas: bigint } | 'estimate';

/** How a send's block is made and answered; see WalletSession.send. */
export interface SendOptions<S> {
  /** Seconds the block moves chain time on by (a clock advance). */
  advance?: number;
  /** Reads `record` needs, made on the block before it is committed (Submission.settle). */
  settle?: (receipts: TransactionReceipt[]) => Promise<S>;
}

/** Sends inside `exclusive`. */
export interface WalletSession {
  address: Address;
  /**
   * Signs `requests` with consecutive nonces and has them mined together (no receipt is
   * awaited before the next is sent). `record` runs in the same transaction that makes their
   * block durable, and only if every one succeeded; resolves after that commit.
   */
  send<T = undefined, S = undefined>(
    requests: TxRequest[],
    record?: (tx: StoreTx, receipts: TransactionReceipt[], settled: S) => Promise<T>,
    options?: SendOptions<S>,
  ): Promise<Submitted<T>>;
}

export interface ServerWallet {
  address: Address;
  /**
   * Runs `work` with this wallet to itself: sends from one wallet never interleave, so
   * nonces have no gaps and an approve is never spent by another request's deposit.
   */
  exclusive<T>(work: (session: WalletSession) => Promise<T>): Promise<T>;
  /** Reads the nonce from the chain at the next send (the chain was restored to a snapshot). */
  forgetNonce(): void;
}

/**
 * A server-side wallet: signs locally with its key and keeps its own nonce, which is
 * re-read from the chain after any failed send (and the send made again, once, when the
 * nonce had been taken by someone else).
 */
export function createServerWallet(
  account: LocalAccount,
  publicClient: PublicClient<Transport, Chain>,
  submitter: TxSubmitter,
  fees: FeePolicy,
): ServerWallet {
  const lock = createKeyedLock();
  let nextNonce: number | undefined;
  const chainId = publicClient.chain.id;

  async function sign(
    request: TxRequest,
    nonce: number,
    feesPerGas: { maxFeePerGas: bigint; maxPriorityFeePerGas: bigint },
  ): Promise<SignedTx> {
    const call = toCall(request);
    const gas =
      request.gas ??
      (await publicClient
        .estimateGas({ account: account.address, ...call })
        .then((estimate) => estimate + estimate / 2n)
        .catch((error: unknown) => {
          throw TransactionFailedError.from(request.label, error);
        }));
    const raw = await account.signTransaction({
      type: 'eip1559',
      chainId,
      nonce,
      gas,
      ...feesPerGas,
      ...call,
    });
    return { raw, hash: keccak256(raw), label: request.label };
  }

  async function send<T, S>(
    requests: TxRequest[],
    record?: (tx: StoreTx, receipts: TransactionReceipt[], settled: S) => Promise<T>,
    options: SendOptions<S> = {},
  ): Promise<Submitted<T>> {
    // Someone else may have sent from this key (the sandbox's own keys are public): the
    // nonce is read from the chain again, and the requests are sent once more.
    for (let attempt = 1; ; attempt++) {
      try {
        return await sendOnce(requests, record, options);
      } catch (error) {
        nextNonce = undefined;
        if (error instanceof StaleNonceError && attempt === 1) continue;
        if (error instanceof HttpError) throw error;
        throw TransactionFailedError.from(requests[0]?.label ?? 'transaction', error);
      }
    }
  }

  async function sendOnce<T, S>(
    requests: TxRequest[],
    record: ((tx: StoreTx, receipts: TransactionReceipt[], settled: S) => Promise<T>) | undefined,
    { advance, settle }: SendOptions<S>,
  ): Promise<Submitted<T>> {
    let nonce =
      nextNonce ??
      (await publicClient.getTransactionCount({
        address: account.address,
        blockTag: 'pending',
      }));
    const feesPerGas =
      fees === 'estimate'
        ? await publicClient.estimateFeesPerGas().then((estimated) => ({
            maxFeePerGas: estimated.maxFeePerGas,
            maxPriorityFeePerGas: estimated.maxPriorityFeePerGas,
          }))
        : fees;
    const txs: SignedTx[] = [];
    for (const request of requests) txs.push(await sign(request, nonce++, feesPerGas));
    const submitted = await submitter.submit<T, S>({
      txs,
      ...(record && { record }),
      ...(settle && { settle }),
      ...(advance !== undefined && { advance }),
    });
    nextNonce = nonce;
    return submitted;
  }

  const session: WalletSession = { address: account.address, send };
  return {
    address: account.address,
    exclusive: (work) => lock(account.address, () => work(session)),
    forgetNonce: () => {
      nextNonce = undefined;
    },
  };
}

function toCall(request: TxRequest): { to?: Address; data?: Hex; value?: bigint } {
  if ('to' in request) return { to: request.to, value: request.value };
  if ('deploy' in request) {
    return { data: encodeDeployData(request.deploy as Parameters<typeof encodeDeployData>[0]) };
  }
  return {
    to: request.address,
    data: encodeFunctionData({
      abi: request.abi,
      functionName: request.functionName,
      args: request.args ?? [],
    } as Parameters<typeof encodeFunctionData>[0]),
    value: request.value,
  };
}
