import type { Hash } from 'viem';
import type { Deployment } from '../chain/deployment.ts';
import { VAULT_CONFIG } from '../chain/deployment.ts';
import type { RpcClient } from '../chain/rpc.ts';
import type { Sql, SqlValue } from '../store/sql.ts';
import { IndexUnavailableError, isIndexFileFailure } from './failure.ts';
import { createFollower, DeepReorgError, poll, type StepOutcome } from './follower.ts';
import {
  type BlockChanges,
  createProjection,
  type FailedCall,
  type VaultState,
} from './projection.ts';
import { openRawStore } from './raw-store.ts';
import {
  type ChainObservation,
  checksummed,
  createChainSource,
  MAX_BLOCKS_PER_STEP,
} from './source.ts';
import { statement } from './statements.ts';
import { totalAssetsAt } from './vault-math.ts';
import { createWriteWaits } from './write-waits.ts';

export { DeepReorgError, INDEX_POLL_MS } from './follower.ts';
export { type ChainObservation, checksummed } from './source.ts';

export interface IndexerOptions {
  /** index.db in the state dir. */
  path: string;
  rpc: RpcClient;
  chainId: number;
  deployment: Deployment;
  /**
   * Blocks this deep are final (0 on the sandbox's own chain): the poll indexes the head less
   * this many blocks, and a reorganisation is looked for no deeper (see commonAncestor).
   */
  finalityDepth?: number;
  /**
   * The first block worth reading: the deployment's, on a chain with history before it.
   * Default 1: block 0 is the genesis, and a chain restored from a checkpoint may answer a
   * block 0 that is not the parent of its block 1.
   */
  startBlock?: number;
  /**
   * The highest block that may be indexed. The sandbox's own chain gives the head of its
   * chain log: a block is indexed only once it is in sandbox.db, so that the index, kept beside
   * it, can tell when sandbox.db has lost blocks (see missingFrom), and a rebuild, which brings
   * back every logged block, never finds the index ahead of the chain.
   */
  ceiling?: () => number;
  /** True while the chain cannot be read (it is being rebuilt): the background poll waits. */
  paused?: () => boolean;
  log: { warn(message: string): void; error(message: string): void };
}

/** What one commit changed. After a reorg every vault counts as changed. */
export interface IndexCommit {
  vaults: Set<string>;
  transactions: Array<{ blockNumber: number; logIndex: number }>;
  reorg: boolean;
}

/** The last indexed block: what a new block's parentHash must match, and the index's time. */
export type Checkpoint = Readonly<{ number: number; hash: Hash; timestamp: number }>;

/**
 * Follows the chain into index.db. `syncTo(n)` indexes up to block n and resolves once it is
 * committed: the write path awaits it before answering, so a client reads its own write from
 * /v1 at once. A poll picks up everything else (someone calling a vault over the RPC URL)
 * within INDEX_POLL_MS. Each step compares the next block's parentHash with the checkpoint;
 * on a mismatch it finds the common ancestor, cuts the raw data back to it and derives the
 * rest again.
 *
 * The façade over the index's parts, as Ponder separates them: the sync source (source.ts:
 * what is read from the chain), the raw store (raw-store.ts: raw rows in index.db), the
 * follower (follower.ts: the head, reorgs, the poll) and the projection (projection.ts: the
 * derived tables). It holds what they share: one writer at a time, the version, the failure.
 */
export function createIndexer(options: IndexerOptions) {
  const finality = options.finalityDepth ?? 0;
  let running: Promise<void> = Promise.resolve();
  let closed = false;
  const source = createChainSource({
    rpc: options.rpc,
    deployment: options.deployment,
    // On a dev chain, blocks are read whole and events come from receipts (see readBlocks).
    fromReceipts: finality === 0,
    stopped: () => closed,
  });
  const { vaults } = source;
  const identity = JSON.stringify({ chainId: options.chainId, contracts: source.watched });
  const projectionConfig = {
    usdc: source.usdc,
    registry: source.registry,
    vaults: new Map(
      [...vaults].map(([address, id]) => [address, { async: VAULT_CONFIG[id].async }]),
    ),
  };
  const raw = openRawStore({ path: options.path, identity, warn: options.log.warn });
  let projection = createProjection(raw.db, projectionConfig);
  let stopPolling: (() => void) | undefined;
  /** Moves with every commit (a step, a rollback): what /v1's answer cache is keyed on. */
  let version = 0;
  /** Told of every commit, after it (graphql/live.ts publishes subscriptions from it). */
  const commitListeners = new Set<(changes: IndexCommit) => void>();
  function committed(changes: IndexCommit): void {
    for (const listener of commitListeners) {
      try {
        listener(changes);
      } catch (error) {
        options.log.warn(`a listener of the index failed: ${(error as Error).message}`);
      }
    }
  }
  const waits = createWriteWaits();

  /**
   * Set once index.db has failed (a damaged page, a disk that no longer takes it): reads then
   * answer IndexUnavailableError, never what the file says, until the file has been started
   * afresh (`reopened`) and the chain indexed into it again.
   */
  let failure: { reason: string; reopened: boolean } | undefined;

  function fail(error: unknown, reason = `index.db failed (${(error as Error).message})`): string {
    if (!failure) {
      options.log.error(
        `${reason}: the data API answers 503 (INDEX_UNAVAILABLE) while it is rebuilt from the chain`,
      );
    }
    failure = { reason, reopened: false };
    // Every answer kept for the last version (the /v1 and GraphQL caches) is dropped.
    version++;
    return reason;
  }

  /** Deletes index.db and opens it empty: every block is indexed into it again. */
  function reopen(): void {
    raw.reopen();
    projection = createProjection(raw.db, projectionConfig);
    lastCheckpoint = undefined;
  }

  /**
   * Rebuilds a failed index.db from the chain, in the background poll. Its subscribers hear
   * nothing of the blocks indexed again, and one reorg-like commit (every vault changed) once
   * it answers again.
   */
  async function rebuild(): Promise<void> {
    await serially(async () => {
      if (closed || !failure || failure.reopened) return;
      reopen();
      failure.reopened = true;
    });
    await syncTo();
    if (closed || !failure?.reopened) return;
    failure = undefined;
    version++;
    committed({ vaults: new Set(vaults.keys()), transactions: [], reorg: true });
    options.log.warn(
      `index.db was rebuilt from the chain (up to block ${checkpoint()?.number ?? 0}); the data API answers from it again`,
    );
  }

  /**
   * index.db through the Sql interface, for IndexView.read. Transitional: statements run on
   * the writer's own connection, which is safe only while every step runs synchronously
   * between its BEGIN and COMMIT (a read never sees a step's uncommitted rows).
   */
  const readSql: Sql = {
    get: async <T>(sql: string, ...params: SqlValue[]) =>
      statement(raw.db, sql).get(...params) as T | undefined,
    all: async <T>(sql: string, ...params: SqlValue[]) =>
      statement(raw.db, sql).all(...params) as unknown as T[],
    run: async () => {
      throw new Error('the index is read-only to its readers');
    },
  };

  /** IndexView.read: `work` on the committed rows; a failing file starts a rebuild. */
  async function query<T>(work: (sql: Sql) => Promise<T>): Promise<T> {
    if (failure) throw new IndexUnavailableError(failure.reason);
    try {
      return await work(readSql);
    } catch (error) {
      if (!isIndexFileFailure(error)) throw error;
      throw new IndexUnavailableError(fail(error));
    }
  }

  /** The last indexed block as of `version` (every read asks for it: the index's time). */
  let lastCheckpoint: { version: number; block: Checkpoint | undefined } | undefined;
  function checkpoint(): Checkpoint | undefined {
    if (lastCheckpoint?.version === version) return lastCheckpoint.block;
    const row = raw.head();
    const block =
      row &&
      Object.freeze({
        number: Number(row.number),
        hash: row.hash,
        timestamp: Number(row.timestamp),
      });
    lastCheckpoint = { version, block };
    return block;
  }

  /** Serialises every step: one writer, in order. */
  function serially(work: () => Promise<void>): Promise<void> {
    const next = running.then(work, work);
    running = next.catch(() => undefined);
    return next;
  }

  const follower = createFollower({
    source,
    raw: () => raw,
    checkpoint,
    finality,
    ...(options.ceiling && { ceiling: options.ceiling }),
    closed: () => closed,
    log: options.log,
    rollBack: (ancestor) => rollBack(ancestor),
  });

  /**
   * Cuts the raw data back to `ancestor` and derives every derived table again from the rest,
   * after `amend` (which may add raw rows, such as corrections) in the same transaction.
   */
  function rollBack(ancestor: number, amend?: () => void): void {
    raw.begin();
    try {
      amend?.();
      raw.cutBackTo(ancestor);
      projection.reset();
      rederive();
      raw.commit();
      version++;
      if (!failure) committed({ vaults: new Set(vaults.keys()), transactions: [], reorg: true });
    } catch (error) {
      raw.rollBackQuietly();
      projection.reset();
      lastCheckpoint = undefined;
      throw error;
    }
  }

  /** Applies every raw row kept, block by block, as the blocks were indexed. */
  function rederive(): void {
    for (const block of raw.rawBlocks()) {
      const at = { number: block.number, timestamp: block.timestamp };
      projection.applyBlock(at, block.logs, block.failed);
      for (const [vault, state] of block.corrections) projection.correct(at, vault, state);
    }
  }

  /** Indexes blocks after the checkpoint up to `target`, one committed step at a time. */
  async function step(target: number): Promise<StepOutcome> {
    const at = checkpoint();
    const from = at ? at.number + 1 : (options.startBlock ?? 1);
    if (from > target) return 'done';
    const to = Math.min(target, from + MAX_BLOCKS_PER_STEP - 1);
    const { blocks, events: readEvents } = await source.readBlocks(from, to);
    if (at && blocks[0]?.parentHash !== at.hash) {
      const ancestor = await follower.commonAncestor(at.number);
      options.log.warn(
        `the chain reorganised below block ${at.number + 1}: the index goes back to block ${ancestor} and follows the new chain`,
      );
      rollBack(ancestor);
      return 'more';
    }
    for (let i = 1; i < blocks.length; i++) {
      if (blocks[i]?.parentHash !== blocks[i - 1]?.hash) return 'reread';
    }
    const events = await readEvents();
    if (!events) return 'reread';

    const changes: IndexCommit = { vaults: new Set(), transactions: [], reorg: false };
    raw.begin();
    try {
      for (const block of blocks) {
        const blockLogs = (events.logs.get(block.number) ?? []).sort(
          (a, b) => a.logIndex - b.logIndex,
        );
        const blockFailed: FailedCall[] = events.failed.get(block.number) ?? [];
        raw.addBlock(block, blockLogs, blockFailed);
        if (blockLogs.length > 0 || blockFailed.length > 0) {
          const changed: BlockChanges = projection.applyBlock(block, blockLogs, blockFailed);
          for (const vault of changed.vaults) changes.vaults.add(vault);
          changes.transactions.push(...changed.transactions);
        }
      }
      raw.commit();
      version++;
      // A rebuild indexes old blocks again: nothing in them is news to a subscriber.
      if (!failure) committed(changes);
    } catch (error) {
      raw.rollBackQuietly();
      // The cached vault states (and the last block) may hold what was rolled back.
      projection.reset();
      lastCheckpoint = undefined;
      throw error;
    }
    return to < target ? 'more' : 'done';
  }

  /**
   * What index.db holds that the chain, whose head is `head`, does not: the index is a witness
   * kept beside sandbox.db. Blocks past the chain's head are missing from it; so are the
   * transactions the index saw in blocks that the chain now has with other hashes, when the
   * chain's blocks of the same numbers lack them (a chain rebuilt after cheat methods keeps
   * every transaction under new hashes: it misses nothing). Undefined when nothing is missing.
   */
  async function missingFrom(head: {
    number: number;
    hash: Hash;
  }): Promise<{ indexedBlock: number; transactions: number } | undefined> {
    try {
      return await compareWith(head);
    } catch (error) {
      // A damaged index is no witness: it is rebuilt.
      if (!isIndexFileFailure(error)) throw error;
      fail(error);
      return undefined;
    }
  }

  async function compareWith(head: {
    number: number;
    hash: Hash;
  }): Promise<{ indexedBlock: number; transactions: number } | undefined> {
    const at = checkpoint();
    if (!at) return undefined;
    if (at.number > head.number) {
      const transactions = new Set(raw.witnessedAfter(head.number).map((row) => row.tx_hash)).size;
      return { indexedBlock: at.number, transactions };
    }
    const [onChain] =
      at.number === head.number ? [head] : await source.headers(at.number, at.number);
    if (onChain?.hash === at.hash) return undefined;
    const ancestor = await follower.commonAncestor(at.number);
    const rows = raw.witnessedAfter(ancestor);
    const numbers = [...new Set(rows.map((row) => Number(row.block_number)))];
    const txsAt = await source.transactionsOf(numbers);
    const lost = new Set(
      rows
        .filter((row) => !txsAt.get(Number(row.block_number))?.has(row.tx_hash))
        .map((row) => row.tx_hash),
    );
    return lost.size > 0 ? { indexedBlock: at.number, transactions: lost.size } : undefined;
  }

  /** Indexes up to `target` (default: the chain's head, less the finality depth). */
  function syncTo(target?: number): Promise<void> {
    return serially(async () => {
      if (closed) return;
      try {
        await follower.indexUpTo(target, step);
      } catch (error) {
        // A damaged file, found by a step or by a rollback after a reorg: rebuilt.
        if (isIndexFileFailure(error)) fail(error);
        // Blocks the index took as final are gone: nothing it holds can be trusted, and the
        // chain is indexed again from the start.
        if (error instanceof DeepReorgError) fail(error, error.message);
        throw error;
      }
    });
  }

  /**
   * Compares each vault's indexed state after the observed block with the chain's there (see
   * observe), and where they differ (a change made outside transactions, such as
   * anvil_setStorageAt over the RPC URL: no event tells the index of it) records the chain's
   * as a correction at that block, logs which fields differed, and answers the vaults
   * corrected. An index that has moved past the block derives its tables again with the
   * correction; one that does not hold the block (not indexed yet, or since reorganised) is
   * left alone.
   */
  async function reconcile(observed: ChainObservation): Promise<string[]> {
    const corrected: string[] = [];
    await serially(async () => {
      // A failed index is being rebuilt from the chain, which holds the vaults' state anyway.
      if (closed || failure) return;
      try {
        await correctFrom(observed, corrected);
      } catch (error) {
        if (isIndexFileFailure(error)) throw new IndexUnavailableError(fail(error));
        throw error;
      }
    });
    return corrected;
  }

  async function correctFrom(observed: ChainObservation, corrected: string[]): Promise<void> {
    const at = checkpoint();
    const { number } = observed.block;
    const held = raw.hashAt(number);
    if (!at || held !== observed.block.hash) return;
    const timestamp = raw.timestampAt(number);
    const indexedAt = (vault: string): VaultState => {
      if (at.number === number) return projection.stateOf(vault);
      return (
        raw.stateAtBlock(vault, number) ?? {
          balance: 0n,
          reserved: 0n,
          totalSupply: 0n,
          apyBps: 0n,
          lastAccrual: 0n,
        }
      );
    };
    const differing = [...observed.states].flatMap(([vault, state]) => {
      const indexed = indexedAt(vault);
      const fields = (Object.keys(state) as Array<keyof VaultState>).filter(
        (field) => state[field] !== indexed[field],
      );
      return fields.length > 0 ? [{ vault, state, indexed, fields }] : [];
    });
    if (differing.length === 0) return;
    const record = () => {
      for (const { vault, state } of differing) raw.addCorrection(number, vault, state);
    };
    if (at.number === number) {
      raw.begin();
      try {
        record();
        for (const { vault, state } of differing)
          projection.correct({ number, timestamp }, vault, state);
        raw.commit();
      } catch (error) {
        raw.rollBackQuietly();
        projection.reset();
        throw error;
      }
      version++;
    } else {
      // The blocks indexed since then were derived from the uncorrected state.
      rollBack(at.number, record);
    }
    for (const { vault, state, indexed, fields } of differing) {
      const detail = fields
        .map((field) => `${field} ${indexed[field]} → ${state[field]}`)
        .join(', ');
      options.log.warn(
        `vault ${checksummed(vault)} at block ${number}: the index had tvl ${totalAssetsAt(indexed, timestamp)}, ` +
          `the chain ${totalAssetsAt(state, timestamp)} (raw USDC; ${detail}; changed outside transactions, as anvil_setStorageAt over the RPC URL does?); the index now holds the chain's`,
      );
      corrected.push(vault);
    }
    if (at.number === number) {
      committed({ vaults: new Set(corrected), transactions: [], reorg: false });
    }
  }

  return {
    /** index.db (tests). Throws IndexUnavailableError while it has failed. */
    get db() {
      if (failure) throw new IndexUnavailableError(failure.reason);
      return raw.db;
    },
    /** The readers' view (view.ts): IndexView.read, over committed rows. */
    query,
    /** Why the index cannot answer (it failed and is being rebuilt), or undefined when it can. */
    failure: (): string | undefined => failure?.reason,
    vaults,
    syncTo,
    /** Each vault's state on the chain at block `at` (see source.ts), for reconcile(). */
    observe: source.observe,
    reconcile,
    /** Rebuilds index.db from the chain now, if it has failed (the poll does it otherwise). */
    rebuild,
    /**
     * Writes a consistent copy of index.db, as indexed so far, to `path` (a new file), between
     * steps; false, writing nothing, while it has failed (it is being rebuilt).
     */
    copyTo(path: string): Promise<boolean> {
      let copied = false;
      return serially(async () => {
        if (failure) return;
        raw.copyTo(path);
        copied = true;
      }).then(() => copied);
    },
    /**
     * Puts the copy at `from` (made by copyTo) in place of index.db, or an empty index.db when
     * undefined, between steps; the next step goes on from the copy's last block (or indexes
     * the chain from the start). Whatever was cached from the old one is stale (the version
     * moves); subscribers are not told (the caller closes them).
     */
    replaceWith(from: string | undefined): Promise<void> {
      return serially(async () => {
        failure = undefined;
        try {
          raw.reopen(from);
        } catch (error) {
          // Derived data: an index.db that cannot be put in place is rebuilt from the chain
          // (the poll does it), and answers 503 INDEX_UNAVAILABLE meanwhile.
          fail(error, `index.db could not be put in place (${(error as Error).message})`);
          raw.reopen();
        }
        projection = createProjection(raw.db, projectionConfig);
        lastCheckpoint = undefined;
        version++;
      });
    },
    missingFrom,
    /**
     * Indexes up to `block` for a write about to be answered, and keeps how long that took
     * (waiting behind a poll included).
     */
    async syncForWrite(block?: number): Promise<void> {
      // A failed index is rebuilt in the background; a write does not wait for that.
      if (failure) return;
      const started = performance.now();
      try {
        await syncTo(block);
      } finally {
        waits.add(performance.now() - started);
      }
    },
    /** The writes' indexing waits: how many so far, and the median and p99 of the last ones. */
    waitStats: waits.stats,
    /**
     * Calls `listener` after each commit with what it changed; answers the unsubscribe. A
     * listener runs synchronously inside the indexer's step: it must only schedule work.
     */
    onCommit(listener: (changes: IndexCommit) => void): () => void {
      commitListeners.add(listener);
      return () => commitListeners.delete(listener);
    },
    /** A value that changes whenever the index commits anything. */
    version: () => version,
    /** The last indexed block; undefined while the index has failed. */
    checkpoint(): Checkpoint | undefined {
      if (failure) return undefined;
      try {
        return checkpoint();
      } catch (error) {
        if (!isIndexFileFailure(error)) throw error;
        fail(error);
        return undefined;
      }
    },
    /** Follows the chain in the background. */
    start(): void {
      stopPolling = poll({
        describe: () => (failure ? 'rebuilding index.db' : 'indexing'),
        work: () => (failure ? rebuild() : syncTo()),
        ...(options.paused && { paused: options.paused }),
        log: options.log,
      });
    },
    async close(): Promise<void> {
      if (closed) return;
      closed = true;
      stopPolling?.();
      await running;
      try {
        raw.close();
      } catch {
        // Closed already by a rebuild that could not finish.
      }
    },
  };
}
export type Indexer = ReturnType<typeof createIndexer>;
