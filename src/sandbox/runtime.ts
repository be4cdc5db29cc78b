import { join } from 'node:path';
import { type CheckpointStore, directoryCheckpoints } from './chain/checkpoint-store.ts';
import {
  type ChainHooks,
  type SandboxChain,
  type StartedChain,
  startChain,
} from './chain/index.ts';
import type { ChainLogger, LocalChain } from './chain/local-chain.ts';
import { directoryMnemonic, type MnemonicStore } from './chain/mnemonic.ts';
import type { IndexFollow } from './chain/sandbox-chain.ts';
import type { SandboxClock } from './clock.ts';
import { StartupError } from './errors.ts';
import { createIndexReads, type IndexReads } from './indexer/index-reads.ts';
import { type ChainObservation, createIndexer, type Indexer } from './indexer/indexer.ts';
import { indexedPast } from './indexer/schema.ts';
import { INDEX_SCHEMA } from './indexer/schema-postgres.ts';
import type { IndexStorageOptions } from './indexer/storage.ts';
import { createFulfiller, type FulfilmentLimits } from './operator/fulfilment.ts';
import { createOnboarder, type Onboarder } from './operator/onboarding.ts';
import { databaseSnapshots } from './snapshots/database.ts';
import { directorySnapshots } from './snapshots/directory.ts';
import { createSnapshots, type Snapshots } from './snapshots/index.ts';
import type { SnapshotStorage } from './snapshots/storage.ts';
import type { Store } from './store/index.ts';
import type { SqlTransaction } from './store/sql.ts';
import { recordCommits } from './team/commit-feed.ts';

const INDEX_FILE = 'index.db';

export interface RuntimeOptions {
  stateDir: string;
  /**
   * Where the chain's checkpoints and the wallet mnemonic are kept: the state dir's files
   * unless given (a sandbox kept in a database gives the database's).
   */
  checkpoints?: CheckpointStore;
  mnemonic?: MnemonicStore;
  persistent: boolean;
  /** sandbox.db, opened by the caller; the runtime closes it once started. */
  store: Store;
  clock: SandboxClock;
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
  /** Where the index is kept: index.db in the state dir unless given (a database's schema). */
  indexStorage?: IndexStorageOptions;
  /**
   * Runs first in each of the index's transactions (the writer lock's fence, for an index in a
   * database on a connection of its own): a throw rolls the transaction back.
   */
  fenceIndex?: (tx: SqlTransaction) => Promise<void>;
  /**
   * Runs on close once everything that writes is stopped (the final checkpoint and the index
   * included), just before the store closes: the writer lock's release, whose row the fences of
   * those last writes still read.
   */
  beforeStoreClose?: () => Promise<void>;
}

/** The sandbox's state and its actors, as one: what the app is built on. */
export interface SandboxRuntime {
  store: Store;
  clock: SandboxClock;
  chain: SandboxChain;
  /** The data API's read model (index.db), indexed before each write is answered. */
  index: IndexReads;
  /** Funds new agents' wallets, from the onboarding outbox. */
  onboarder: Onboarder;
  /**
   * What snapshot and restore work on, beside the above: the sandbox's own chain (its
   * producer's lock and head, its checkpoints; undefined on a chain it does not own), the
   * index open now, and the actors to pause (the onboarder above, the fulfiller).
   */
  parts: {
    local: LocalChain | undefined;
    indexer(): Indexer;
    fulfiller(): ReturnType<typeof createFulfiller> | undefined;
  };
  /** Snapshots and restores of all of it; undefined on a chain the sandbox does not own. */
  snapshots: Snapshots | undefined;
  /** Stops the actors, then the chain (with its final checkpoint), the index and the store. */
  close(): Promise<void>;
}

/**
 * The composition root: starts the chain, opens the index (index.db) and wires the chain's
 * hooks to it, then starts the sandbox's own actors (the onboarder, the ERC-7540 fulfiller).
 * Nothing below builds its neighbours; close() stops them in the reverse order.
 */
export async function startRuntime(options: RuntimeOptions): Promise<SandboxRuntime> {
  const { store, clock, log, stateDir } = options;
  const indexStorage: IndexStorageOptions = options.indexStorage ?? {
    kind: 'sqlite',
    path: join(stateDir, INDEX_FILE),
  };
  let index: Indexer | undefined;
  /** Set once serve stops: the index's poll waits, the final checkpoint still reconciles. */
  let stopping = false;
  let closing: Promise<void> | undefined;
  const current = (): Indexer => {
    if (!index) throw new Error('index.db is not open');
    return index;
  };
  const hooks: ChainHooks<ChainObservation | undefined> = {
    afterWrite: (block) => (index ? indexBeforeAnswering(index, block, log) : Promise.resolve()),
    // The index is derived from events: a change made outside transactions (anvil cheat
    // methods over the RPC URL) reaches it only here, when a checkpoint makes it permanent.
    // The chain is read at the dumped block while no block is made, and compared after.
    observeAtCheckpoint: async (at) => index?.observe(at),
    afterCheckpoint: async (block, observed) => {
      await index?.syncTo(block);
      if (observed) await index?.reconcile(observed);
    },
    // The index goes back to the rebuilt chain (blocks it held may be gone or replaced)
    // before the rebuild counts as done.
    afterRebuild: async () => {
      await index?.syncTo();
    },
    // An anvil a killed serve left running may hold blocks past the log that index.db has
    // witnessed: acknowledged writes sandbox.db lost. They are not dropped; the start is refused.
    // A sandbox in a database leaves no anvil to take over (each writer has a work dir of its
    // own): the index's witness is checked once it is open (openIndex), on every start.
    ...(indexStorage.kind === 'sqlite' && {
      checkUnlogged: (lastLogged: { number: number; hash: string }) => {
        const missing = indexedPast(indexStorage.path, lastLogged);
        if (missing) {
          throw lostWritesError(
            lostWritesWords(stateDir, indexStorage),
            lastLogged.number,
            missing,
          );
        }
      },
    }),
  };
  const started: StartedChain = await startChain({
    stateDir,
    checkpoints: options.checkpoints ?? directoryCheckpoints(stateDir),
    mnemonic: options.mnemonic ?? directoryMnemonic(stateDir),
    persistent: options.persistent,
    clock,
    store,
    sandboxId: options.sandboxId,
    log,
    rpcUrl: options.rpcUrl,
    deploymentFile: options.deploymentFile,
    checkpointAfterMs: options.checkpointAfterMs,
    hooks,
  });
  const { chain, follow } = started;
  try {
    const recovering = follow.recovering;
    index = await openIndex(
      stateDir,
      indexStorage,
      log,
      follow,
      recovering && (() => stopping || recovering()),
      options.fenceIndex,
    );
    const reads = createIndexReads({ current, chain, store });
    reads.attach(index);
    await started.afterIndexOpened();
    const onboarder = createOnboarder({
      treasury: chain.treasury,
      deployment: chain.deployment,
      store,
      log,
    });
    await onboarder.resume();
    // The sandbox operates the ERC-7540 vault where it can mine at will; elsewhere the
    // deployment's operator does. A restore starts a new one.
    const startFulfiller = () => {
      if (!chain.dev) return undefined;
      const fulfiller = createFulfiller({
        // The index open now, whichever that is.
        index: { ...reads.view, onCommit: reads.onCommit },
        store,
        clock,
        operator: chain.treasury,
        wallet: chain.wallet,
        log,
        limits: options.fulfilment,
      });
      fulfiller.start();
      return fulfiller;
    };
    let fulfiller = startFulfiller();
    const { local } = started;
    const snapshots =
      local &&
      createSnapshots({
        storage: snapshotStorage({ options, store, current }),
        sandboxId: options.sandboxId,
        clock,
        chain: local,
        // The index open now, whichever that is.
        index: {
          syncTo: (block) => current().syncTo(block),
          checkpoint: () => current().checkpoint(),
        },
        async pauseOperators() {
          await fulfiller?.stop();
          await onboarder.pause();
        },
        async afterRestore() {
          // What is kept in memory is read again from the restored state (or, after a failed
          // restore, from whatever is on disk). Each step is tried whatever the others do.
          const steps: Array<[string, () => unknown]> = [
            ['reading the clock', () => clock.reload()],
            ['resetting the wallets', () => chain.forgetNonces()],
            ['restarting the onboarder', () => onboarder.restart()],
            ['restarting the fulfiller', () => (fulfiller = startFulfiller())],
            ['forgetting when nodes were seen', () => reads.queries.forgetNodesSeen()],
            ['indexing', () => current().syncTo()],
          ];
          for (const [what, step] of steps) {
            try {
              await step();
            } catch (error) {
              log.warn(`after the restore, ${what} failed: ${(error as Error).message}`);
            }
          }
        },
      });
    return {
      store,
      clock,
      chain,
      index: reads,
      onboarder,
      snapshots: snapshots || undefined,
      parts: { local, indexer: current, fulfiller: () => fulfiller },
      close() {
        closing ??= (async () => {
          stopping = true;
          await fulfiller?.stop();
          await onboarder.stop();
          // The final checkpoint compares the chain with the index (afterCheckpoint), which
          // must still be open: what cheat methods changed is otherwise never corrected in it.
          await chain.close();
          await index?.close();
          await options.beforeStoreClose?.();
          await store.close();
        })();
        return closing;
      },
    };
  } catch (error) {
    await index?.close();
    await started.abandon();
    throw error;
  }
}

/**
 * Where snapshots are kept: in the database when the sandbox's rows are (PostgreSQL), with the
 * index's tables when they are there too; else in the state dir.
 */
function snapshotStorage({
  options,
  store,
  current,
}: {
  options: RuntimeOptions;
  store: Store;
  current: () => Indexer;
}): SnapshotStorage {
  if (store.kind === 'postgres') {
    return databaseSnapshots({
      store,
      mnemonic: options.mnemonic ?? directoryMnemonic(options.stateDir),
      index: {
        inDatabase: options.indexStorage?.kind === 'postgres',
        replacedBy: (work) => current().replacedBy(work),
        replaceWith: (from) => current().replaceWith(from),
      },
    });
  }
  return directorySnapshots({
    stateDir: options.stateDir,
    store,
    index: {
      copyTo: (path) => current().copyTo(path),
      replaceWith: (from) => current().replaceWith(from),
    },
  });
}

/**
 * Opens index.db, catches it up with the chain, and follows the chain from then on. A damaged
 * index.db is rebuilt from the chain. With `follow.witnessFor` (the head of the chain rebuilt
 * from sandbox.db), an index that holds what that chain does not is refused: sandbox.db has
 * lost acknowledged writes.
 */
async function openIndex(
  stateDir: string,
  storage: IndexStorageOptions,
  log: ChainLogger,
  follow: IndexFollow,
  paused: (() => boolean) | undefined,
  fence: RuntimeOptions['fenceIndex'],
): Promise<Indexer> {
  const index = await createIndexer({
    storage,
    rpc: follow.rpc,
    chainId: follow.chainId,
    deployment: follow.deployment,
    finalityDepth: follow.finalityDepth,
    ...(follow.startBlock !== undefined && { startBlock: Math.max(1, follow.startBlock) }),
    ...(follow.ceiling && { ceiling: follow.ceiling }),
    ...(paused && { paused }),
    // Replicas follow the index's commits through the feed (team/commit-feed.ts), which the
    // writer lock fences.
    ...(storage.kind === 'postgres'
      ? { afterCommitTx: recordCommits(fence && { fence }) }
      : fence && { afterCommitTx: (tx: SqlTransaction) => fence(tx) }),
    log,
  });
  try {
    if (follow.witnessFor) {
      const missing = await index.missingFrom(follow.witnessFor);
      if (missing) {
        const words = lostWritesWords(stateDir, storage);
        throw lostWritesError(words, follow.witnessFor.number, missing);
      }
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

/** How the lost-writes refusal names the chain log's place and the index's, and what to do. */
interface LostWritesWords {
  /** Where the chain log is: sandbox.db, or the database. */
  log: string;
  /** The index: index.db, or its schema in the database. */
  index: string;
  /** How the acknowledged writes may have been lost. */
  how: string;
  /** What to do. */
  remedy: string;
}

function lostWritesWords(stateDir: string, storage: IndexStorageOptions): LostWritesWords {
  if (storage.kind === 'postgres') {
    return {
      log: 'the database',
      index: `the index (schema ${INDEX_SCHEMA})`,
      how: 'Was the database restored from a backup older than its index, or were rows deleted by hand?',
      remedy:
        'Restore the whole database from one backup (pg_dump is one consistent copy); or, to go on without those writes, ' +
        `drop the index (DROP SCHEMA ${INDEX_SCHEMA} CASCADE: it is rebuilt from the chain)`,
    };
  }
  const database = join(stateDir, 'sandbox.db');
  return {
    log: database,
    index: 'index.db',
    how: `Was its write-ahead log ${database}-wal deleted or damaged after a crash, or an older copy of sandbox.db restored?`,
    remedy:
      'Restore the whole state directory from one backup; or, to go on without those writes, ' +
      `delete ${storage.path} (it is rebuilt from the chain)`,
  };
}

/**
 * The refusal when the index holds blocks or transactions that the chain rebuilt from the
 * chain log does not: writes that were acknowledged (so committed to the log) are gone from
 * it. Starting anyway would serve a chain without them, and hand their agents' wallets to new
 * agents.
 */
function lostWritesError(
  words: LostWritesWords,
  chainHead: number,
  missing: { indexedBlock: number; transactions: number },
): StartupError {
  const lost =
    missing.indexedBlock > chainHead
      ? `${words.index} has indexed blocks up to ${missing.indexedBlock}` +
        (missing.transactions > 0
          ? `, with ${missing.transactions} vault transaction(s) past it`
          : '')
      : `${words.index} holds ${missing.transactions} vault transaction(s) that its blocks no longer have`;
  return new StartupError(
    `${words.log} holds the chain up to block ${chainHead}, but ${lost}: writes that were acknowledged are missing from ${words.log}. ` +
      `${words.how} ${words.remedy}`,
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
