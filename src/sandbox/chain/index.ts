import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Chain, Hash, PublicClient, TransactionReceipt, Transport } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import {
  CHAIN_ID,
  CHAIN_NAME,
  ContractAddresses,
  type StandbyStatus,
  VAULT_IDS,
} from '../../api/schemas/index.ts';
import type { SandboxClock } from '../clock.ts';
import { StartupError } from '../errors.ts';
import { createIndexer, type Indexer, type IndexerOptions } from '../indexer/indexer.ts';
import { indexedPast } from '../indexer/schema.ts';
import type { Store } from '../store/index.ts';
import { automaticCheckpoints } from './checkpoint-mode.ts';
import { createChainClients, SANDBOX_FEES } from './clients.ts';
import { AgentOnboarding, SandboxVault } from './contracts/artifacts.ts';
import {
  type Deployment,
  deployedContracts,
  deployProtocol,
  describeMisplaced,
  findMisplacedContracts,
} from './deployment.ts';
import { isUnreachable, TransactionFailedError, tracedRevertReason } from './errors.ts';
import { createFulfiller, type FulfilmentLimits } from './fulfilment.ts';
import { type ChainLogger, type LocalChain, startLocalChain } from './local-chain.ts';
import { createOnboarder, type Onboarder } from './onboarding.ts';
import type { Submitted, TxSubmitter } from './producer.ts';
import { createRpcClient, type RpcClient, toQuantity } from './rpc.ts';
import {
  ACCOUNT_INDEX,
  createKeyring,
  createMnemonic,
  createServerWallet,
  type FeePolicy,
  GENESIS_KEYS,
  mnemonicFingerprint,
  mnemonicPath,
  readMnemonic,
  type ServerWallet,
} from './wallets.ts';

export type { Deployment } from './deployment.ts';
export type { ChainLogger } from './local-chain.ts';

const DEPLOYMENT_FILE = 'deployment.json';
/** How long /health trusts its last look at the RPC endpoint. */
const CONNECTION_CHECK_MS = 1000;

export interface ChainOptions {
  stateDir: string;
  persistent: boolean;
  clock: SandboxClock;
  store: Store;
  /** Identifies this sandbox's state; checkpoints carry it. */
  sandboxId: string;
  log: ChainLogger;
  /** An existing node instead of the sandbox's own anvil. */
  rpcUrl?: string;
  /** Contract addresses on a node that is not a dev chain. */
  deploymentFile?: string;
  /** Bounds of the ERC-7540 fulfiller other than its defaults (tests push past them). */
  fulfilment?: Partial<FulfilmentLimits>;
  /** How long new blocks wait for an automatic checkpoint, if not the default (tests). */
  checkpointAfterMs?: number;
}

/** The running chain as the routes see it. */
export interface SandboxChain {
  rpcUrl: string;
  chainId: number;
  chainName: string;
  /** True when the chain accepts anvil's dev methods (time travel, balances). */
  dev: boolean;
  publicClient: PublicClient<Transport, Chain>;
  deployment: Deployment;
  treasury: ServerWallet;
  faucet: ServerWallet;
  /** The server-side wallet at HD index `index`. */
  wallet(index: number): ServerWallet;
  /** Funds new agents' wallets, from the onboarding outbox. */
  onboarder: Onboarder;
  /** The data API's read model (index.db), indexed before each write is answered. */
  index: Indexer;
  /**
   * Moves chain time on by `seconds` (a block is mined that much past the later of sandbox
   * time and the chain's last block) and runs `record` in the commit that makes the block
   * durable.
   */
  advanceTime<T>(seconds: number, record: () => T): Promise<T>;
  /** False while the RPC endpoint does not answer, or the chain is being rebuilt. */
  isConnected(): Promise<boolean>;
  /** Sandbox time, which chain time follows: the timestamp the next block will carry. */
  nowSeconds(): number;
  /**
   * Moves whenever the chain may have changed: its head block on the sandbox's own chain,
   * a new value at every call on another (nothing derived from it may be cached).
   */
  stateVersion(): unknown;
  /**
   * Takes a checkpoint now and resolves, once it is on disk, with the block it holds;
   * undefined on a chain the sandbox does not own (which keeps its own history). Rejects,
   * saying why, when the chain may not be checkpointed (it is being rebuilt, or it no longer
   * matches the log).
   */
  checkpoint(): Promise<number | undefined>;
  /** The warm standby's state (`none` on a chain the sandbox does not own). */
  standby(): StandbyStatus;
  /** On the sandbox's own chain only: what snapshots and restores need (snapshots/index.ts). */
  rewind?: Rewind;
  close(): Promise<void>;
}

/** The own chain's handles for snapshots and restores. */
export interface Rewind {
  copyChainWith: LocalChain['copyChainWith'];
  replace: LocalChain['replace'];
  /** Stops the onboarder and the fulfiller, once what they are sending is done. */
  pauseOperators(): Promise<void>;
  /** After a restore: the wallets read their nonces again, and the operators start anew. */
  resumeOperators(): void;
}

/**
 * Starts the sandbox's own chain (restored from its checkpoint and log, or from the genesis
 * checkpoint when new) or connects to `rpcUrl`, and checks that the chain, the database and
 * wallet.mnemonic belong together.
 */
export async function startChain(options: ChainOptions): Promise<SandboxChain> {
  const keyring = createKeyring(openMnemonic(options.stateDir, options.store));
  if (!options.rpcUrl) return startOwnChain(options, keyring);
  try {
    return await connectRemote(options, options.rpcUrl, keyring);
  } catch (error) {
    if (isUnreachable(error)) {
      throw new StartupError(`cannot reach the chain at ${options.rpcUrl}`);
    }
    throw error;
  }
}

/**
 * wallet.mnemonic, created with a new sandbox and checked against the database ever after:
 * every agent's wallet derives from it, so a missing or swapped file is refused.
 */
function openMnemonic(stateDir: string, store: Store): string {
  const fingerprint = store.meta.get('mnemonic_fingerprint');
  const mnemonic = readMnemonic(stateDir);
  if (fingerprint === undefined) {
    const created = mnemonic ?? createMnemonic(stateDir);
    store.meta.set('mnemonic_fingerprint', mnemonicFingerprint(created));
    return created;
  }
  if (mnemonic === undefined) {
    throw new StartupError(
      `${mnemonicPath(stateDir)} is missing, but every agent wallet of this sandbox derives from it; ` +
        'restore it from a backup of this state directory',
    );
  }
  if (mnemonicFingerprint(mnemonic) !== fingerprint) {
    throw new StartupError(
      `${mnemonicPath(stateDir)} is not the mnemonic this sandbox was created with; ` +
        'restore the original from a backup of this state directory',
    );
  }
  return mnemonic;
}

function walletRegistry(
  keyring: ReturnType<typeof createKeyring>,
  publicClient: PublicClient<Transport, Chain>,
  submitter: TxSubmitter,
  fees: FeePolicy,
) {
  const wallets = new Map<number, ServerWallet>();
  return (index: number) => {
    let found = wallets.get(index);
    if (!found) {
      found = createServerWallet(keyring(index), publicClient, submitter, fees);
      wallets.set(index, found);
    }
    return found;
  };
}

async function startOwnChain(
  options: ChainOptions,
  keyring: ReturnType<typeof createKeyring>,
): Promise<SandboxChain> {
  let index: Indexer | undefined;
  /** Set once serve stops: the index's poll waits, the final checkpoint still reconciles. */
  let stopping = false;
  const local: LocalChain = await startLocalChain({
    stateDir: options.stateDir,
    sandboxId: options.sandboxId,
    store: options.store,
    clock: options.clock,
    log: options.log,
    revertReason: tracedRevertReason,
    // The index is derived from events: a change made outside transactions (anvil cheat
    // methods over the RPC URL) reaches it only here, when a checkpoint makes it permanent.
    // The chain is read at the dumped block while no block is made, and compared after.
    observeAtCheckpoint: async (at) => index?.observe(at),
    afterCheckpoint: async (block, observed) => {
      await index?.syncTo(block);
      if (observed) await index?.reconcile(observed);
    },
    // serve refused any value but `manual` at start.
    automaticCheckpoints: automaticCheckpoints() !== false,
    checkpointAfterMs: options.checkpointAfterMs,
    // The index goes back to the rebuilt chain (blocks it held may be gone or replaced)
    // before the rebuild counts as done.
    afterRebuild: async () => {
      await index?.syncTo();
    },
    // An anvil a killed serve left running may hold blocks past the log that index.db has
    // witnessed: acknowledged writes sandbox.db lost. They are not dropped; the start is refused.
    checkUnlogged: (lastLogged) => {
      const missing = indexedPast(join(options.stateDir, INDEX_FILE), lastLogged);
      if (missing) throw lostWritesError(options.stateDir, lastLogged.number, missing);
    },
  });
  try {
    const { publicClient } = createChainClients(local.nodeUrl, CHAIN_ID, CHAIN_NAME, local.fetch);
    index = await openIndex(options, local.rpc, CHAIN_ID, local.deployment, 0, {
      // Only blocks already in sandbox.db's chain log: then the index never holds a block
      // that sandbox.db does not, unless sandbox.db lost it, and a rebuild, which brings back
      // every logged block, never finds it ahead. It waits while the chain is rebuilt.
      ceiling: () => local.producer.head().number,
      paused: () => stopping || local.recovering(),
      witnessFor: local.producer.head(),
    });
    const indexed = index;
    const submitter: TxSubmitter = {
      async submit(submission) {
        const submitted = await local.producer.submit(submission);
        local.afterCommit();
        await indexBeforeAnswering(indexed, local.producer.head().number, options.log);
        return submitted;
      },
    };
    const wallets = new Set<ServerWallet>();
    const registry = walletRegistry(keyring, publicClient, submitter, SANDBOX_FEES);
    const wallet = (index: number) => {
      const found = registry(index);
      wallets.add(found);
      return found;
    };
    await checkAgentsAgainstChain(options.store, publicClient, local.deployment);
    catchUpClock(options.clock, options.store, local.producer.head().timestamp);
    const treasury = createServerWallet(
      privateKeyToAccount(GENESIS_KEYS.treasury),
      publicClient,
      submitter,
      SANDBOX_FEES,
    );
    const onboarder = createOnboarder({
      treasury,
      deployment: local.deployment,
      store: options.store,
      log: options.log,
    });
    onboarder.resume();
    const startFulfiller = () => {
      const started = createFulfiller({
        index: indexed,
        store: options.store,
        clock: options.clock,
        operator: treasury,
        wallet,
        log: options.log,
        limits: options.fulfilment,
      });
      started.start();
      return started;
    };
    let fulfiller = startFulfiller();
    const faucet = createServerWallet(
      privateKeyToAccount(GENESIS_KEYS.faucet),
      publicClient,
      submitter,
      SANDBOX_FEES,
    );
    wallets.add(treasury).add(faucet);
    return {
      rpcUrl: local.rpcUrl,
      chainId: CHAIN_ID,
      chainName: CHAIN_NAME,
      dev: true,
      publicClient,
      deployment: local.deployment,
      treasury,
      onboarder,
      index: indexed,
      faucet,
      wallet,
      rewind: {
        copyChainWith: local.copyChainWith,
        replace: local.replace,
        async pauseOperators() {
          await fulfiller.stop();
          await onboarder.pause();
        },
        resumeOperators() {
          for (const each of wallets) each.forgetNonce();
          onboarder.restart();
          fulfiller = startFulfiller();
        },
      },
      async advanceTime(seconds, record) {
        // The block that carries the new time also accrues every vault's yield: the jump in
        // value is then on the chain (YieldAccrued), and the data API's subscribers hear of it.
        const { recorded } = await treasury.exclusive((session) =>
          session.send(
            VAULT_IDS.map((id) => ({
              label: `accruing the ${id} vault's yield`,
              address: local.deployment.vaults[id],
              abi: SandboxVault.abi,
              functionName: 'accrue',
              gas: ACCRUE_GAS,
            })),
            record,
            seconds,
          ),
        );
        return recorded;
      },
      isConnected: connectionCheck(local.rpc, () => local.recovering()),
      nowSeconds: () => options.clock.nowSeconds(),
      stateVersion: () => local.producer.head().number,
      // Asked for: taken even without new blocks, to keep what cheat methods changed.
      checkpoint: () => local.checkpoint({ evenWithoutNewBlocks: true }),
      standby: () => local.standby.status(),
      close: async () => {
        stopping = true;
        await fulfiller.stop();
        await onboarder.stop();
        // The final checkpoint compares the chain with the index (afterCheckpoint), which must
        // still be open: what cheat methods changed is otherwise never corrected in it.
        await local.close({ checkpoint: options.persistent });
        await indexed.close();
      },
    };
  } catch (error) {
    await index?.close();
    await local.close({ checkpoint: false });
    throw error;
  }
}

/**
 * Refuses a database that does not know every agent the chain holds (an older or lost
 * sandbox.db): its next registration would hand an existing agent's funded wallet to a new
 * agent. Every onboarding commits with its agent's row, so the two counts are always equal.
 */
async function checkAgentsAgainstChain(
  store: Store,
  publicClient: PublicClient<Transport, Chain>,
  deployment: Deployment,
): Promise<void> {
  const onboarded = await publicClient.readContract({
    address: deployment.agent_onboarding,
    abi: AgentOnboarding.abi,
    functionName: 'onboardedCount',
  });
  // Agents in the onboarding outbox are registered but not funded yet.
  const known = store.agents.count() - store.onboarding.count();
  if (BigInt(known) !== onboarded) {
    throw new StartupError(
      `the chain holds ${onboarded} onboarded agents but sandbox.db knows ${known}: ` +
        'the database is not the one this chain was built with (was an older copy restored?); ' +
        'restore the whole state directory from one backup',
    );
  }
}

/** Chain time never goes back: the sandbox clock moves up to just past the chain's last block. */
function catchUpClock(clock: SandboxClock, store: Store, latestTimestamp: number): void {
  if (clock.nowSeconds() <= latestTimestamp) {
    store.transaction(() => clock.raiseTo(latestTimestamp + 1));
  }
}

function connectionCheck(probe: RpcClient, busy: () => boolean) {
  let lastCheck = { at: 0, connected: true };
  let checking: Promise<boolean> | undefined;
  return async () => {
    if (busy()) return false;
    if (Date.now() - lastCheck.at < CONNECTION_CHECK_MS) return lastCheck.connected;
    checking ??= probe
      .call('eth_blockNumber')
      .then(
        () => true,
        () => false,
      )
      .then((connected) => {
        lastCheck = { at: Date.now(), connected };
        checking = undefined;
        return connected;
      });
    return checking;
  };
}

/**
 * Sends and waits for receipts on a node the sandbox does not mine (`--rpc-url`). Nothing is
 * logged: that chain keeps its own history. `record` runs once every receipt is a success.
 */
function createDirectSubmitter(
  rpc: RpcClient,
  publicClient: PublicClient<Transport, Chain>,
  store: Store,
  afterWrite: (block: number) => Promise<void>,
): TxSubmitter {
  return {
    async submit<T>(submission: Parameters<TxSubmitter['submit']>[0]): Promise<Submitted<T>> {
      for (const tx of submission.txs) {
        try {
          await rpc.call('eth_sendRawTransaction', [tx.raw]);
        } catch (error) {
          throw TransactionFailedError.from(tx.label, error);
        }
      }
      const receipts: TransactionReceipt[] = [];
      for (const tx of submission.txs) {
        const receipt = await publicClient
          .waitForTransactionReceipt({ hash: tx.hash, timeout: 60_000 })
          .catch((error: unknown) => {
            throw TransactionFailedError.from(tx.label, error, tx.hash);
          });
        if (receipt.status !== 'success') {
          throw new TransactionFailedError(tx.label, 'the transaction reverted', tx.hash);
        }
        receipts.push(receipt);
      }
      const [outcome] = store.commitBlocks([], [() => submission.record?.(receipts)]);
      if (!outcome?.ok) throw outcome?.error;
      await store.sync();
      await afterWrite(Math.max(0, ...receipts.map((receipt) => Number(receipt.blockNumber))));
      return { receipts, recorded: outcome.value as T };
    },
  };
}

async function connectRemote(
  options: ChainOptions,
  rpcUrl: string,
  keyring: ReturnType<typeof createKeyring>,
): Promise<SandboxChain> {
  const rpc = createRpcClient(rpcUrl);
  const chainId = Number(await rpc.call<string>('eth_chainId'));
  const chainName = chainId === CHAIN_ID ? CHAIN_NAME : `chain ${chainId}`;
  const { publicClient, testClient } = createChainClients(rpcUrl, chainId, chainName);
  const dev = await isDevChain(rpc);
  let index: Indexer | undefined;
  const submitter = createDirectSubmitter(rpc, publicClient, options.store, (block) =>
    index ? indexBeforeAnswering(index, block, options.log) : Promise.resolve(),
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
    if (options.store.agents.hasAny()) {
      throw new StartupError(
        `the protocol's contracts are gone from ${rpcUrl} (was the chain reset?); start with a new --state directory`,
      );
    }
    deployment = await deployProtocol(treasury);
    writeFileSync(join(options.stateDir, DEPLOYMENT_FILE), JSON.stringify(deployment), {
      mode: 0o600,
    });
  }
  const deployed = deployment;
  // Not a dev chain: blocks this deep are taken as final; a reorg above them is followed.
  index = await openIndex(options, rpc, chainId, deployed, dev ? 0 : REMOTE_FINALITY_DEPTH, {
    startBlock: deployed.deployed_block ?? (await firstBlockWithCode(rpc, deployed.usdc)),
  });
  const indexed = index;
  const onboarder = createOnboarder({
    treasury,
    deployment: deployed,
    store: options.store,
    log: options.log,
  });
  onboarder.resume();
  // The sandbox operates the ERC-7540 vault where it can mine at will; elsewhere the
  // deployment's operator does.
  const fulfiller = dev
    ? createFulfiller({
        index: indexed,
        store: options.store,
        clock: options.clock,
        operator: treasury,
        wallet,
        log: options.log,
        limits: options.fulfilment,
      })
    : undefined;
  fulfiller?.start();
  return {
    rpcUrl,
    chainId,
    chainName,
    dev,
    publicClient,
    deployment: deployed,
    treasury,
    faucet,
    wallet,
    onboarder,
    index: indexed,
    async advanceTime(seconds, record) {
      await syncTime(options.clock.nowSeconds() + seconds);
      const [outcome] = options.store.commitBlocks([], [record]);
      if (!outcome?.ok) throw outcome?.error;
      await options.store.sync();
      await indexBeforeAnswering(indexed, undefined, options.log);
      return outcome.value as ReturnType<typeof record>;
    },
    isConnected: connectionCheck(rpc, () => false),
    nowSeconds: () => options.clock.nowSeconds(),
    stateVersion: () => ({}),
    checkpoint: async () => undefined,
    standby: () => ({ status: 'none', block_number: null }),
    close: async () => {
      await fulfiller?.stop();
      await onboarder.stop();
      // Let queued sends settle before the store closes.
      await Promise.all([treasury, faucet].map((w) => w.exclusive(async () => undefined)));
      await indexed.close();
    },
  };
}

/** Fixed gas for a vault's accrue() (an estimate needs the block's new time). */
const ACCRUE_GAS = 150_000n;

/** On a chain that is not a dev chain, blocks this deep are indexed as final. */
const REMOTE_FINALITY_DEPTH = 12;
const INDEX_FILE = 'index.db';

/**
 * Opens index.db, catches it up with the chain, and follows the chain from then on. A damaged
 * index.db is rebuilt from the chain. With `witnessFor` (the head of the chain rebuilt from
 * sandbox.db), an index that holds what that chain does not is refused: sandbox.db has lost
 * acknowledged writes.
 */
async function openIndex(
  options: ChainOptions,
  rpc: RpcClient,
  chainId: number,
  deployment: Deployment,
  finalityDepth: number,
  follow: {
    startBlock?: number;
    witnessFor?: { number: number; hash: Hash };
  } & Pick<IndexerOptions, 'ceiling' | 'paused'> = {},
): Promise<Indexer> {
  const path = join(options.stateDir, INDEX_FILE);
  const index = createIndexer({
    path,
    rpc,
    chainId,
    deployment,
    finalityDepth,
    ...(follow.startBlock !== undefined && { startBlock: Math.max(1, follow.startBlock) }),
    ...(follow.ceiling && { ceiling: follow.ceiling }),
    ...(follow.paused && { paused: follow.paused }),
    log: options.log,
  });
  try {
    if (follow.witnessFor) {
      const missing = await index.missingFrom(follow.witnessFor);
      if (missing) throw lostWritesError(options.stateDir, follow.witnessFor.number, missing);
    }
    await index.syncTo().catch(async (error: unknown) => {
      // Damage that quick_check did not see, found by the first write to the file.
      if (index.failure() === undefined) throw error;
      await index.rebuild();
    });
  } catch (error) {
    await index.close();
    throw error;
  }
  index.start();
  return index;
}

/**
 * The refusal when index.db holds blocks or transactions that the chain rebuilt from
 * sandbox.db does not: writes that were acknowledged (so in sandbox.db's write-ahead log,
 * sandbox.db-wal) are gone from it. Starting anyway would serve a chain without them, and hand
 * their agents' wallets to new agents.
 */
function lostWritesError(
  stateDir: string,
  chainHead: number,
  missing: { indexedBlock: number; transactions: number },
): StartupError {
  const database = join(stateDir, 'sandbox.db');
  const lost =
    missing.indexedBlock > chainHead
      ? `index.db has indexed blocks up to ${missing.indexedBlock}` +
        (missing.transactions > 0
          ? `, with ${missing.transactions} vault transaction(s) past it`
          : '')
      : `index.db holds ${missing.transactions} vault transaction(s) that its blocks no longer have`;
  return new StartupError(
    `${database} holds the chain up to block ${chainHead}, but ${lost}: writes that were acknowledged are missing from ${database}. ` +
      `Was its write-ahead log ${database}-wal deleted or damaged after a crash, or an older copy of sandbox.db restored? ` +
      'Restore the whole state directory from one backup; or, to go on without those writes, ' +
      `delete ${join(stateDir, INDEX_FILE)} (it is rebuilt from the chain)`,
  );
}

/**
 * Indexes up to `block` (the chain's head when undefined) before a write is answered, so that
 * its author reads it from /v1 at once. The write has happened whatever becomes of this: a
 * failure is logged, and the background poll catches up.
 */
async function indexBeforeAnswering(
  index: Indexer,
  block: number | undefined,
  log: ChainLogger,
): Promise<void> {
  try {
    await index.syncForWrite(block);
  } catch (error) {
    log.warn(
      `indexing after a write failed: ${(error as Error).message}; the index catches up shortly`,
    );
  }
}

/**
 * The first block at which `address` has code (binary search over eth_getCode at past
 * blocks), for a deployment file that does not say where its contracts were deployed. A node
 * that keeps no state for old blocks cannot answer: that start-up asks for deployed_block.
 */
async function firstBlockWithCode(rpc: RpcClient, address: string): Promise<number> {
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

async function isDevChain(rpc: RpcClient): Promise<boolean> {
  try {
    await rpc.call('anvil_nodeInfo');
    return true;
  } catch (error) {
    if (isUnreachable(error)) throw error;
    return false;
  }
}

/** `--deployment FILE`, or the addresses this state dir deployed on an external dev chain. */
function readDeployment(
  options: ChainOptions,
  dev: boolean,
): { deployment: Deployment; path: string } | undefined {
  const path =
    options.deploymentFile ?? (dev ? join(options.stateDir, DEPLOYMENT_FILE) : undefined);
  if (!path || !existsSync(path)) {
    if (options.deploymentFile) throw new StartupError(`--deployment ${path}: no such file`);
    return undefined;
  }
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(path, 'utf8'));
  } catch {
    throw new StartupError(`${path} is not valid JSON`);
  }
  const parsed = ContractAddresses.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new StartupError(
      `${path} is not a deployment file: ${issue?.path.join('.') || 'it'}: ${issue?.message}`,
    );
  }
  return { deployment: parsed.data as Deployment, path };
}
