import {
  type Chain,
  type Hash,
  type Hex,
  type PublicClient,
  type TransactionReceipt,
  TransactionReceiptNotFoundError,
  type Transport,
  WaitForTransactionReceiptTimeoutError,
} from 'viem';
import { CHAIN_ID, CHAIN_NAME } from '../../api/schemas/index.ts';
import { StartupError } from '../errors.ts';
import type { Store } from '../store/index.ts';
import { createChainClients } from './clients.ts';
import {
  deployedContracts,
  deployProtocol,
  describeMisplaced,
  findMisplacedContracts,
} from './deployment.ts';
import { readDeployment, writeDeployment } from './deployment-file.ts';
import { isUnreachable, TransactionFailedError } from './errors.ts';
import type { Submission, Submitted, TxSubmitter } from './producer.ts';
import { createRpcClient, type RpcClient, toQuantity } from './rpc.ts';
import {
  type ChainOptions,
  connectionCheck,
  type StartedChain,
  walletRegistry,
} from './sandbox-chain.ts';
import { ACCOUNT_INDEX, type createKeyring, type FeePolicy } from './wallets.ts';

/** On a chain that is not a dev chain, blocks this deep are indexed as final. */
const REMOTE_FINALITY_DEPTH = 12;
/** How often a sent transaction's receipt is asked for, and for how long. */
const RECEIPT_POLL_MS = 50;
const RECEIPT_TIMEOUT_MS = 60_000;

/**
 * Connects to a node the sandbox does not mine (`--rpc-url`): on a dev chain it keeps the
 * node's time with sandbox time and funds its own wallets, and deploys the protocol when no
 * deployment is known there; elsewhere it needs `--deployment`.
 */
export async function connectRemote<Observed>(
  options: ChainOptions<Observed>,
  rpcUrl: string,
  keyring: ReturnType<typeof createKeyring>,
): Promise<StartedChain> {
  const rpc = createRpcClient(rpcUrl);
  const chainId = Number(await rpc.call<string>('eth_chainId'));
  const chainName = chainId === CHAIN_ID ? CHAIN_NAME : `chain ${chainId}`;
  const { publicClient, testClient } = createChainClients(rpcUrl, chainId, chainName);
  const dev = await isDevChain(rpc);
  const submitter = createDirectSubmitter(rpc, publicClient, options.store, (block) =>
    options.hooks.afterWrite(block),
  );
  const fees: FeePolicy = 'estimate';
  const wallet = walletRegistry(keyring, publicClient, submitter, fees);
  const treasury = wallet(ACCOUNT_INDEX.treasury);
  const faucet = wallet(ACCOUNT_INDEX.faucet);

  const syncTime = async (seconds: number) => {
    if (!dev) return;
    const latest = await publicClient.getBlock();
    // anvil_setTime moves anvil's clock (it then runs on in real time), even backwards:
    // never below the latest block.
    const target = Math.max(seconds, Number(latest.timestamp) + 1);
    await testClient.request({ method: 'anvil_setTime', params: [target] } as never);
    await testClient.mine({ blocks: 1 });
  };
  if (dev) {
    await syncTime(options.clock.nowSeconds());
    for (const [account, eth] of [
      [treasury.address, 10n ** 24n],
      [faucet.address, 10n ** 23n],
    ] as const) {
      if ((await publicClient.getBalance({ address: account })) < eth / 2n) {
        await testClient.setBalance({ address: account, value: eth });
      }
    }
  }

  const known = readDeployment(options, dev);
  let deployment = known?.deployment;
  if (known) {
    // Every address, not just one: a call to an address without code succeeds and does nothing.
    const misplaced = await findMisplacedContracts(rpc, known.deployment);
    const gone =
      misplaced.length === deployedContracts(known.deployment).length &&
      misplaced.every((entry) => entry.found === 'no code');
    if (gone && dev && !options.deploymentFile) {
      // Deploying afresh would orphan every agent's wallet, shares and strategies.
      throw new StartupError(
        `the protocol's contracts named in ${known.path} are gone from ${rpcUrl} (was the chain reset?); start with a new --state directory`,
      );
    }
    if (misplaced.length > 0) {
      throw new StartupError(
        options.deploymentFile
          ? `--deployment ${known.path}: ${describeMisplaced(misplaced, `on ${rpcUrl}`)}; ` +
              'give the addresses of the sandbox contracts deployed there (as in /sandbox/info "contracts")'
          : `${known.path}: ${describeMisplaced(misplaced, `on ${rpcUrl}`)}; ` +
              'restore the state directory from a backup, or start with a new --state directory',
      );
    }
  }
  if (!deployment) {
    if (!dev) {
      throw new StartupError(
        `${rpcUrl} is not a dev chain and no contracts are known there: pass --deployment FILE`,
      );
    }
    // Deploying afresh would orphan every agent's wallet, shares and strategies.
    if (await options.store.agents.hasAny()) {
      throw new StartupError(
        `the protocol's contracts are gone from ${rpcUrl} (was the chain reset?); start with a new --state directory`,
      );
    }
    deployment = await deployProtocol(treasury);
    writeDeployment(options.stateDir, deployment);
  }
  const deployed = deployment;
  const startBlock = deployed.deployed_block ?? (await firstBlockWithCode(rpc, deployed.usdc));
  // Let queued sends settle before the store closes.
  const settle = () =>
    Promise.all([treasury, faucet].map((w) => w.exclusive(async () => undefined))).then(
      () => undefined,
    );
  return {
    chain: {
      rpcUrl,
      chainId,
      chainName,
      dev,
      publicClient,
      deployment: deployed,
      treasury,
      faucet,
      wallet,
      forgetNonces: () => wallet.forgetNonces(),
      async advanceTime(seconds, record) {
        const target = options.clock.nowSeconds() + seconds;
        await syncTime(target);
        const [outcome] = await options.store.commitBlocks([], [(tx) => record(tx, target)]);
        if (!outcome?.ok) throw outcome?.error;
        await options.store.sync();
        await options.hooks.afterWrite(undefined);
        return outcome.value as Awaited<ReturnType<typeof record>>;
      },
      isConnected: connectionCheck(rpc, () => false),
      nowSeconds: () => options.clock.nowSeconds(),
      checkpoint: async () => undefined,
      standby: () => ({ status: 'none', block_number: null }),
      close: settle,
    },
    follow: {
      rpc,
      chainId,
      deployment: deployed,
      // Not a dev chain: blocks this deep are taken as final; a reorg above them is followed.
      finalityDepth: dev ? 0 : REMOTE_FINALITY_DEPTH,
      startBlock,
    },
    afterIndexOpened: async () => undefined,
    abandon: async () => undefined,
  };
}

/**
 * Sends and waits for receipts on a node the sandbox does not mine (`--rpc-url`). Nothing is
 * logged: that chain keeps its own history. `record` runs once every receipt is a success.
 */
export function createDirectSubmitter(
  rpc: RpcClient,
  publicClient: PublicClient<Transport, Chain>,
  store: Store,
  afterWrite: (block: number) => Promise<void>,
): TxSubmitter {
  return {
    async submit<T, S>(submission: Submission<T, S>): Promise<Submitted<T>> {
      for (const tx of submission.txs) await sendRaw(rpc, tx);
      const receipts: TransactionReceipt[] = [];
      for (const tx of submission.txs) {
        const receipt = await receiptOf(publicClient, tx.hash).catch((error: unknown) => {
          throw TransactionFailedError.from(tx.label, error, tx.hash);
        });
        if (receipt.status !== 'success') {
          throw new TransactionFailedError(tx.label, 'the transaction reverted', tx.hash);
        }
        receipts.push(receipt);
      }
      const settled = (await submission.settle?.(receipts)) as S;
      const [outcome] = await store.commitBlocks(
        [],
        [async (tx) => submission.record?.(tx, receipts, settled)],
      );
      if (!outcome?.ok) throw outcome?.error;
      await store.sync();
      await afterWrite(Math.max(0, ...receipts.map((receipt) => Number(receipt.blockNumber))));
      return { receipts, recorded: outcome.value as T };
    },
  };
}

/**
 * Sends a signed transaction. When the node's answer is lost (a dropped connection, a
 * timeout), the node may have taken it: the same bytes are sent again until the node answers,
 * and an answer that refuses them (already known, or its nonce used: mined) counts as sent
 * when the node has the transaction. Failing at the lost answer would leave a write that may
 * take effect answered as not done, and a retry with its Idempotency-Key would sign it again.
 */
async function sendRaw(rpc: RpcClient, tx: { raw: Hex; hash: Hash; label: string }) {
  const deadline = Date.now() + RECEIPT_TIMEOUT_MS;
  for (let resent = false; ; resent = true) {
    try {
      await rpc.call('eth_sendRawTransaction', [tx.raw]);
      return;
    } catch (error) {
      if (resent && !isUnreachable(error) && (await nodeHas(rpc, tx.hash))) return;
      if (!isUnreachable(error) || Date.now() >= deadline) {
        throw TransactionFailedError.from(tx.label, error);
      }
    }
    await new Promise((resolve) => setTimeout(resolve, RECEIPT_POLL_MS));
  }
}

/** Whether the node holds the transaction, mined or waiting (false when it cannot say). */
async function nodeHas(rpc: RpcClient, hash: Hash): Promise<boolean> {
  try {
    return (await rpc.call('eth_getTransactionByHash', [hash])) !== null;
  } catch {
    return false;
  }
}

/**
 * The receipt of a sent transaction, asked for until the node has it. Not viem's
 * waitForTransactionReceipt: once a receipt is not found there, it waits for the next block,
 * which a node that mines a block per transaction (anvil's default) never makes while no one
 * else writes, when it answered before indexing the block it had just mined.
 */
async function receiptOf(
  publicClient: PublicClient<Transport, Chain>,
  hash: Hash,
): Promise<TransactionReceipt> {
  const deadline = Date.now() + RECEIPT_TIMEOUT_MS;
  for (;;) {
    try {
      return await publicClient.getTransactionReceipt({ hash });
    } catch (error) {
      // Not found yet, or the node failed this one request (an error, a dropped connection):
      // the transaction is sent and its outcome is the chain's, so it is asked for again.
      // Failing at once would answer a write that took effect as failed onchain (kept so for
      // its Idempotency-Key), or as not done (run again by a retry with its key).
      if (Date.now() >= deadline) {
        if (error instanceof TransactionReceiptNotFoundError) {
          throw new WaitForTransactionReceiptTimeoutError({ hash });
        }
        throw error;
      }
    }
    await new Promise((resolve) => setTimeout(resolve, RECEIPT_POLL_MS));
  }
}

/**
 * The first block at which `address` has code (binary search over eth_getCode at past
 * blocks), for a deployment file that does not say where its contracts were deployed. A node
 * that keeps no state for old blocks cannot answer: that start-up asks for deployed_block.
 */
export async function firstBlockWithCode(rpc: RpcClient, address: string): Promise<number> {
  const hasCode = async (block: number) => {
    const code = await rpc.call<string>('eth_getCode', [address, toQuantity(block)]);
    return code !== '0x' && code !== '';
  };
  let low = 0;
  let high = Number(await rpc.call<string>('eth_blockNumber'));
  try {
    while (low < high) {
      const middle = Math.floor((low + high) / 2);
      if (await hasCode(middle)) high = middle;
      else low = middle + 1;
    }
  } catch (error) {
    if (isUnreachable(error)) throw error;
    throw new StartupError(
      `cannot find the block the contracts were deployed in (the node keeps no state for old blocks: ${(error as Error).message}); add "deployed_block" to the deployment file`,
    );
  }
  return low;
}

/** True when the node answers anvil's own methods (time travel, balances, mining at will). */
export async function isDevChain(rpc: RpcClient): Promise<boolean> {
  try {
    await rpc.call('anvil_nodeInfo');
    return true;
  } catch (error) {
    if (isUnreachable(error)) throw error;
    return false;
  }
}
