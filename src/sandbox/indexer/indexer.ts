import type { Hash } from 'viem';
import type { Deployment } from '../chain/deployment.ts';
import { VAULT_CONFIG } from '../chain/deployment.ts';
import type { RpcClient } from '../chain/rpc.ts';
import type { Sql, SqlTransaction } from '../store/sql.ts';
import { connectionFailureReason, IndexUnavailableError } from './failure.ts';
import { createFollower, DeepReorgError, poll, type StepOutcome } from './follower.ts';
import { type BlockChanges, createProjection, type RawLog, type VaultState } from './projection.ts';
import * as raw from './raw-store.ts';
import { INDEX_SCHEMA } from './schema-postgres.ts';
import {
  type ChainObservation,
  checksummed,
  createChainSource,
  type Header,
  MAX_BLOCKS_PER_STEP,
} from './source.ts';
import { type IndexStorageOptions, openIndexStorage } from './storage.ts';
import { totalAssetsAt } from './vault-math.ts';
import { createWriteWaits } from './write-waits.ts';

export { DeepReorgError, INDEX_POLL_MS } from './follower.ts';
export { type ChainObservation, checksummed } from './source.ts';
export type { IndexStorageOptions } from './storage.ts';

export interface IndexerOptions {
  /** Where the index is kept: index.db in the state dir, or a schema of a PostgreSQL database. */
  storage: IndexStorageOptions;
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
  /**
   * Runs inside each of the index's transactions (a step, a rollback, a correction, the end of
   * a rebuild), after its rows and before its COMMIT, with the index's last block as committed
   * and what the commit's listeners are told once it is (empty while a failed index is rebuilt:
   * they are told nothing then): where replicas are to be told of the commit (the commit feed,
   * team/commit-feed.ts; a NOTIFY is sent at COMMIT). A throw rolls the transaction back.
   */
  afterCommitTx?: (
    tx: SqlTransaction,
    head: Checkpoint | undefined,
    commit: IndexCommit,
  ) => Promise<void>;
}

const ZERO_ADDRESS = '0x0000000000000000000000000000000000000000';
/**
 * At most this many accounts' ETH is read back at one checkpoint (inside its exclusive
 * section, where no block is made): the accounts the index knows, in turn.
 */
export const ACCOUNTS_PER_OBSERVATION = 256;

/** What one commit changed. After a reorg every vault counts as changed. */
export interface IndexCommit {
  vaults: Set<string>;
  transactions: Array<{ blockNumber: number; logIndex: number }>;
  reorg: boolean;
}

/** The last indexed block: what a new block's parentHash must match, and the index's time. */
export type Checkpoint = Readonly<{ number: number; hash: Hash; timestamp: number }>;

/** What a commit that tells its listeners nothing (one of a rebuild) says to afterCommitTx. */
const QUIET_COMMIT: IndexCommit = Object.freeze({
  vaults: new Set<string>(),
  transactions: [],
  reorg: false,
});

/**
 * Follows the chain into the index (index.db, or the index's schema on PostgreSQL).
 * `syncTo(n)` indexes up to block n and resolves once it is committed: the write path awaits
 * it before answering, so a client reads its own write from /v1 at once. A poll picks up
 * everything else (someone calling a vault over the RPC URL) within INDEX_POLL_MS. Each step
 * compares the next block's parentHash with the checkpoint; on a mismatch it finds the common
 * ancestor, cuts the raw data back to it and derives the rest again.
 *
 * The façade over the index's parts, as Ponder separates them: the sync source (source.ts:
 * what is read from the chain), the storage (storage.ts: where the rows are kept), the raw
 * rows (raw-store.ts), the follower (follower.ts: the head, reorgs, the poll) and the
 * projection (projection.ts: the derived tables). It holds what they share: one writer at a
 * time, the version, the last indexed block, the failure. Each step, rollback and correction is
 * one transaction; readers (query) see committed rows only.
 */
export async function createIndexer(options: IndexerOptions) {
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
  const projection = createProjection({
    usdc: source.usdc,
    protocolToken: source.protocolToken,
    registry: source.registry,
    governor: source.governor,
    agentPass: source.agentPass,
    vaults: new Map(
      [...vaults].map(([address, id]) => [address, { async: VAULT_CONFIG[id].async }]),
    ),
  });
  /** The index's name in what is logged and answered. */
  const name = options.storage.kind === 'sqlite' ? 'index.db' : `the index (${INDEX_SCHEMA})`;
  const storage = await openIndexStorage(options.storage, identity, options.log.warn);
  let stopPolling: (() => void) | undefined;
  /** Moves with every commit (a step, a rollback): what /v1's answer cache is keyed on. */
  let version = 0;
  /** The last indexed block, as committed: read at open, set after each commit. */
  let head: Checkpoint | undefined;
  /** True while the storage is being emptied or replaced: reads wait for the new one. */
  let reopening = false;
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
   * Set once the index has failed (a damaged page of index.db, a disk that no longer takes it,
   * a chain that reorganised deeper than the finality depth): reads then answer
   * IndexUnavailableError, never what the index says, until it has been started afresh
   * (`reopened`) and the chain indexed into it again.
   */
  let failure: { reason: string; reopened: boolean } | undefined;

  function fail(error: unknown, reason = `${name} failed (${(error as Error).message})`): string {
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

  /** The last block the storage holds (committed, or as `sql`, a transaction, sees it). */
  async function storedHead(sql: Sql = storage.sql): Promise<Checkpoint | undefined> {
    const row = await raw.headBlock(sql);
    return row && Object.freeze(row);
  }

  try {
    head = await storedHead();
  } catch (error) {
    // Damage that quick_check did not see: rebuilt (the poll does it, or the first sync).
    if (!storage.isDamage(error)) {
      await storage.close();
      throw error;
    }
    fail(error);
  }

  /** Empties the storage, or puts the copy at `from` in place; reads wait meanwhile. */
  async function reopen(from?: string): Promise<void> {
    reopening = true;
    projection.reset();
    try {
      await storage.reopen(from);
    } finally {
      reopening = false;
      // What the storage holds now: the new rows, or, after a reopen that failed, what is left
      // (nothing that can be read is indexed again from the start).
      head = await storedHead().catch(() => undefined);
    }
  }

  /**
   * Runs `work` as one transaction of the index, with the afterCommitTx hook; `work` answers
   * the last indexed block as of its rows, and `commit` (called after it) what the commit's
   * listeners are to be told (nothing while a failed index is rebuilt). What the projection
   * keeps in memory is forgotten if the transaction is rolled back.
   */
  async function inTransaction(
    work: (tx: SqlTransaction) => Promise<Checkpoint | undefined>,
    commit: () => IndexCommit,
  ): Promise<void> {
    try {
      head = await storage.transaction(async (tx) => {
        const at = await work(tx);
        await options.afterCommitTx?.(tx, at, failure ? QUIET_COMMIT : commit());
        return at;
      });
      version++;
    } catch (error) {
      projection.reset();
      throw error;
    }
  }

  /**
   * Tells afterCommitTx of `commit` in a transaction of its own, with no rows of the index's:
   * what changed the index outside a step (a rebuild's end, a replacement), so that replicas
   * read the index anew from then on. A failure is logged: they read it at the next commit.
   */
  async function hookAlone(commit: IndexCommit, what: string): Promise<void> {
    const hook = options.afterCommitTx;
    if (!hook) return;
    await storage
      .transaction((tx) => hook(tx, head, commit))
      .catch((error: unknown) => {
        options.log.warn(
          `${what} was not recorded for the replicas of ${name} (${(error as Error).message}): they read it at its next commit`,
        );
      });
  }

  /**
   * Rebuilds a failed index from the chain, in the background poll. Its subscribers hear
   * nothing of the blocks indexed again, and one reorg-like commit (every vault changed) once
   * it answers again.
   */
  async function rebuild(): Promise<void> {
    await serially(async () => {
      if (closed || !failure || failure.reopened) return;
      await reopen();
      failure.reopened = true;
    });
    await syncTo();
    if (closed || !failure?.reopened) return;
    failure = undefined;
    const everything: IndexCommit = {
      vaults: new Set(vaults.keys()),
      transactions: [],
      reorg: true,
    };
    await hookAlone(everything, 'the end of its rebuild');
    version++;
    committed(everything);
    options.log.warn(
      `${name} was rebuilt from the chain (up to block ${head?.number ?? 0}); the data API answers from it again`,
    );
  }

  /** Refuses a read while the index cannot answer. */
  function checkReadable(): void {
    if (failure) throw new IndexUnavailableError(failure.reason);
    if (reopening) {
      throw new IndexUnavailableError(`${name} is being replaced`, 'it answers again at once');
    }
  }

  /**
   * IndexView.read: `work` on the committed rows. A damaged storage starts a rebuild; one that
   * cannot be reached (a lost PostgreSQL connection) answers IndexUnavailableError while it
   * lasts, and is not rebuilt.
   */
  async function query<T>(work: (sql: Sql) => Promise<T>): Promise<T> {
    checkReadable();
    try {
      return await work(storage.sql);
    } catch (error) {
      if (storage.isDamage(error)) throw new IndexUnavailableError(fail(error));
      if (storage.isUnreachable(error)) {
        throw new IndexUnavailableError(
          `its database cannot be reached (${connectionFailureReason(error)})`,
          'it answers again once the connection is back',
        );
      }
      throw error;
    }
  }

  /** Serialises every step: one writer, in order. */
  function serially(work: () => Promise<void>): Promise<void> {
    const next = running.then(work, work);
    running = next.catch(() => undefined);
    return next;
  }

  const follower = createFollower({
    source,
    indexedHashes: (from, to) => raw.hashesBetween(storage.sql, from, to),
    checkpoint: () => head,
    finality,
    ...(options.ceiling && { ceiling: options.ceiling }),
    closed: () => closed,
    log: options.log,
    rollBack: (ancestor) => rollBack(ancestor),
  });

  /**
   * Cuts the raw data back to `ancestor` and derives every derived table again from the rest,
   * after `amend` (which may add raw rows, such as corrections), in one transaction.
   */
  async function rollBack(
    ancestor: number,
    amend?: (tx: SqlTransaction) => Promise<void>,
  ): Promise<void> {
    const everything = (): IndexCommit => ({
      vaults: new Set(vaults.keys()),
      transactions: [],
      reorg: true,
    });
    await inTransaction(async (tx) => {
      await amend?.(tx);
      await raw.cutBackTo(tx, ancestor);
      projection.reset();
      await rederive(tx);
      return storedHead(tx);
    }, everything);
    if (!failure) committed(everything());
  }

  /** Applies every raw row kept, block by block, as the blocks were indexed. */
  async function rederive(tx: SqlTransaction): Promise<void> {
    for (const block of await raw.rawBlocks(tx)) {
      const at = { number: block.number, timestamp: block.timestamp };
      await projection.applyBlock(tx, at, block.logs, block.failed);
      for (const [vault, state] of block.corrections) {
        await projection.correct(tx, at, vault, state);
      }
    }
  }

  /**
   * The accounts whose ETH a block may have moved: those that sent or received one of its
   * transactions (known where blocks are read whole: a dev chain), and those a USDC or
   * protocol-token transfer names (an onboarding sends ETH along with them, by an internal
   * call no transaction's `to` shows). On a chain read with eth_getLogs only the latter.
   */
  function accountsMoved(block: Header, logs: RawLog[]): string[] {
    const accounts = new Set(block.accounts);
    for (const log of logs) {
      if (log.address !== source.usdc && log.address !== source.protocolToken) continue;
      for (const topic of log.topics.slice(1, 3))
        accounts.add(`0x${topic.slice(26)}`.toLowerCase());
    }
    accounts.delete(ZERO_ADDRESS);
    return [...accounts];
  }

  /** Indexes blocks after the checkpoint up to `target`, one committed step at a time. */
  async function step(target: number): Promise<StepOutcome> {
    const at = head;
    const from = at ? at.number + 1 : (options.startBlock ?? 1);
    if (from > target) return 'done';
    const to = Math.min(target, from + MAX_BLOCKS_PER_STEP - 1);
    const { blocks, events: readEvents } = await source.readBlocks(from, to);
    if (at && blocks[0]?.parentHash !== at.hash) {
      const ancestor = await follower.commonAncestor(at.number);
      options.log.warn(
        `the chain reorganised below block ${at.number + 1}: the index goes back to block ${ancestor} and follows the new chain`,
      );
      await rollBack(ancestor);
      return 'more';
    }
    for (let i = 1; i < blocks.length; i++) {
      if (blocks[i]?.parentHash !== blocks[i - 1]?.hash) return 'reread';
    }
    const events = await readEvents();
    if (!events) return 'reread';

    const sourced: raw.SourcedBlock[] = blocks.map((block) => ({
      block,
      logs: (events.logs.get(block.number) ?? []).sort((a, b) => a.logIndex - b.logIndex),
      failed: events.failed.get(block.number) ?? [],
    }));
    const reads = sourced.map(({ block, logs }) => ({
      block,
      accounts: accountsMoved(block, logs),
    }));
    const last = reads.at(-1);
    if (finality > 0 && last) {
      // Blocks are not read whole here (no transactions' senders): gas and plain transfers
      // are seen by reading the accounts the index knows, in turn, after the step's last block.
      last.accounts = [...new Set([...last.accounts, ...(await nextKnownAccounts())])];
    }
    const balances = await source.balancesAt(reads);
    const changes: IndexCommit = { vaults: new Set(), transactions: [], reorg: false };
    await inTransaction(
      async (tx) => {
        await raw.addBlocks(tx, sourced);
        await raw.addEthBalances(tx, balances);
        for (const { block, logs, failed } of sourced) {
          if (logs.length === 0 && failed.length === 0) continue;
          const changed: BlockChanges = await projection.applyBlock(tx, block, logs, failed);
          for (const vault of changed.vaults) changes.vaults.add(vault);
          changes.transactions.push(...changed.transactions);
        }
        const last = blocks.at(-1);
        return last
          ? Object.freeze({ number: last.number, hash: last.hash, timestamp: last.timestamp })
          : head;
      },
      () => changes,
    );
    // A rebuild indexes old blocks again: nothing in them is news to a subscriber.
    if (!failure) committed(changes);
    return to < target ? 'more' : 'done';
  }

  /**
   * What the index holds that the chain, whose head is `head`, does not: the index is a witness
   * kept beside sandbox.db. Blocks past the chain's head are missing from it; so are the
   * transactions the index saw in blocks that the chain now has with other hashes, when the
   * chain's blocks of the same numbers lack them (a chain rebuilt after cheat methods keeps
   * every transaction under new hashes: it misses nothing). Undefined when nothing is missing.
   */
  async function missingFrom(chainHead: {
    number: number;
    hash: Hash;
  }): Promise<{ indexedBlock: number; transactions: number } | undefined> {
    try {
      return await compareWith(chainHead);
    } catch (error) {
      // A damaged index is no witness: it is rebuilt.
      if (!storage.isDamage(error)) throw error;
      fail(error);
      return undefined;
    }
  }

  /**
   * Not counted as lost vault transactions: the governor's and AgentPass's logs, and the
   * tokens' (a deposit's USDC transfer has its vault's own log; the others, read for the
   * wallets' balances, were never counted).
   */
  const witnessApart = [source.governor, source.agentPass, source.usdc, source.protocolToken];

  async function compareWith(chainHead: {
    number: number;
    hash: Hash;
  }): Promise<{ indexedBlock: number; transactions: number } | undefined> {
    const at = failure ? undefined : head;
    if (!at) return undefined;
    if (at.number > chainHead.number) {
      const rows = await raw.witnessedAfter(storage.sql, chainHead.number, witnessApart);
      const transactions = new Set(rows.map((row) => row.tx_hash)).size;
      return { indexedBlock: at.number, transactions };
    }
    const [onChain] =
      at.number === chainHead.number ? [chainHead] : await source.headers(at.number, at.number);
    if (onChain?.hash === at.hash) return undefined;
    const ancestor = await follower.commonAncestor(at.number);
    const rows = await raw.witnessedAfter(storage.sql, ancestor, witnessApart);
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
        // A damaged file, found by a step or by a rollback after a reorg: rebuilt. A lost
        // connection is not damage: the poll tries again.
        if (storage.isDamage(error)) fail(error);
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
        await correctAccounts(observed);
        await correctFrom(observed, corrected);
      } catch (error) {
        if (storage.isDamage(error)) throw new IndexUnavailableError(fail(error));
        throw error;
      }
    });
    return corrected;
  }

  /** The last account observed: the next observation goes on after it. */
  let observedUpTo = '';

  /** The next ACCOUNTS_PER_OBSERVATION accounts whose ETH the index holds, in turn. */
  async function nextKnownAccounts(): Promise<string[]> {
    const next = (after: string) =>
      storage.sql.all<{ address: string }>(
        'SELECT DISTINCT address FROM eth_balances WHERE address > ? ORDER BY address LIMIT ?',
        after,
        ACCOUNTS_PER_OBSERVATION,
      );
    let rows = await next(observedUpTo);
    if (rows.length === 0 && observedUpTo !== '') rows = await next('');
    const accounts = rows.map((row) => row.address);
    observedUpTo = accounts.at(-1) ?? '';
    return accounts;
  }

  /**
   * Each vault's state on the chain at block `at` (source.ts observe), and the ETH of the next
   * ACCOUNTS_PER_OBSERVATION accounts the index knows, in turn (a change outside transactions,
   * anvil_setBalance over the RPC URL, is seen by a later checkpoint when there are more).
   */
  async function observe(at: { number: number; hash: Hash }): Promise<ChainObservation> {
    const observed = await source.observe(at);
    if (closed || failure) return observed;
    try {
      const accounts = await nextKnownAccounts();
      const balances = await source.balancesAt([{ block: at, accounts }]);
      return { ...observed, accounts: balances.get(at.number) ?? new Map() };
    } catch (error) {
      // The vaults' observation stands: the accounts wait for the next checkpoint.
      options.log.warn(`the accounts' ETH was not observed: ${(error as Error).message}`);
      return observed;
    }
  }

  /**
   * Where an observed account's ETH differs from the index's at that block (anvil_setBalance
   * over the RPC URL: no transaction tells of it), records the chain's as a reading at the
   * block. Readings of later blocks, read from the chain after the change, stand.
   */
  async function correctAccounts(observed: ChainObservation): Promise<void> {
    const at = head;
    const { number } = observed.block;
    if (!at || !observed.accounts || observed.accounts.size === 0) return;
    if ((await raw.hashAt(storage.sql, number)) !== observed.block.hash) return;
    const differing = new Map<string, bigint>();
    for (const [account, balance] of observed.accounts) {
      const indexed = (await raw.ethBalanceAt(storage.sql, account, number)) ?? 0n;
      if (indexed === balance) continue;
      differing.set(account, balance);
      options.log.warn(
        `account ${checksummed(account)} at block ${number}: the index had ${indexed} wei, the chain ${balance} (changed outside transactions, as anvil_setBalance over the RPC URL does?); the index now holds the chain's`,
      );
    }
    if (differing.size === 0) return;
    // No vault changed: the commit's listeners hear nothing; replicas read the new version.
    await inTransaction(
      async (tx) => {
        await raw.addEthBalances(tx, new Map([[number, differing]]));
        return at;
      },
      () => QUIET_COMMIT,
    );
  }

  async function correctFrom(observed: ChainObservation, corrected: string[]): Promise<void> {
    const at = head;
    const { number } = observed.block;
    const held = await raw.hashAt(storage.sql, number);
    if (!at || held !== observed.block.hash) return;
    const timestamp = await raw.timestampAt(storage.sql, number);
    const indexedAt = async (vault: string): Promise<VaultState> => {
      if (at.number === number) return projection.stateOf(storage.sql, vault);
      return (
        (await raw.stateAtBlock(storage.sql, vault, number)) ?? {
          balance: 0n,
          reserved: 0n,
          totalSupply: 0n,
          apyBps: 0n,
          lastAccrual: 0n,
        }
      );
    };
    const differing: Array<{
      vault: string;
      state: VaultState;
      indexed: VaultState;
      fields: Array<keyof VaultState>;
    }> = [];
    for (const [vault, state] of observed.states) {
      const indexed = await indexedAt(vault);
      const fields = (Object.keys(state) as Array<keyof VaultState>).filter(
        (field) => state[field] !== indexed[field],
      );
      if (fields.length > 0) differing.push({ vault, state, indexed, fields });
    }
    if (differing.length === 0) return;
    const record = async (tx: SqlTransaction) => {
      for (const { vault, state } of differing) await raw.addCorrection(tx, number, vault, state);
    };
    const correctedHere = (): IndexCommit => ({
      vaults: new Set(differing.map(({ vault }) => vault)),
      transactions: [],
      reorg: false,
    });
    if (at.number === number) {
      await inTransaction(async (tx) => {
        await record(tx);
        for (const { vault, state } of differing) {
          await projection.correct(tx, { number, timestamp }, vault, state);
        }
        return at;
      }, correctedHere);
    } else {
      // The blocks indexed since then were derived from the uncorrected state.
      await rollBack(at.number, record);
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
    if (at.number === number) committed(correctedHere());
  }

  return {
    /**
     * index.db's read-only connection (committed rows only). Throws IndexUnavailableError while
     * it has failed; SQLite only (throws on PostgreSQL). Transitional: for what still reads the
     * file directly.
     */
    get db() {
      checkReadable();
      return storage.readerDb;
    },
    /** The readers' view (view.ts): IndexView.read, over committed rows. */
    query,
    /** Why the index cannot answer (it failed and is being rebuilt), or undefined when it can. */
    failure: (): string | undefined => failure?.reason,
    vaults,
    syncTo,
    /** Each vault's state and some accounts' ETH on the chain at block `at`, for reconcile(). */
    observe,
    reconcile,
    /** Rebuilds the index from the chain now, if it has failed (the poll does it otherwise). */
    rebuild,
    /**
     * Writes a consistent copy of index.db, as indexed so far, to `path` (a new file), between
     * steps; false, writing nothing, while it has failed (it is being rebuilt). Rejects on
     * PostgreSQL (snapshots of the index there are a later step).
     */
    copyTo(path: string): Promise<boolean> {
      let copied = false;
      return serially(async () => {
        if (failure) return;
        await storage.copyTo(path);
        copied = true;
      }).then(() => copied);
    },
    /**
     * Puts the copy at `from` (made by copyTo) in place of index.db, or an empty index when
     * undefined, between steps; the next step goes on from the copy's last block (or indexes
     * the chain from the start). Whatever was cached from the old one is stale (the version
     * moves); subscribers are not told (the caller closes them), afterCommitTx is, of a
     * reorg-like commit (replicas). A copy rejects on PostgreSQL.
     */
    replaceWith(from: string | undefined): Promise<void> {
      return serially(async () => {
        failure = undefined;
        try {
          await reopen(from);
        } catch (error) {
          if (storage.kind !== 'sqlite') throw error;
          // Derived data: an index.db that cannot be put in place is rebuilt from the chain
          // (the poll does it), and answers 503 INDEX_UNAVAILABLE meanwhile.
          fail(error, `index.db could not be put in place (${(error as Error).message})`);
          await reopen();
        }
        version++;
        // Its own subscribers are closed by the caller; a replica's are told that every vault
        // changed (and its answer caches move on).
        await hookAlone(
          { vaults: new Set(vaults.keys()), transactions: [], reorg: true },
          'the replacement',
        );
      });
    },
    /**
     * The index's tables are replaced by `work`: a transaction on another connection to the
     * same database (a restore on PostgreSQL puts the sandbox's rows and the index's back in
     * one; snapshots/database.ts), run between steps, reads waiting meanwhile. Committed or
     * not, the last block is read again from the storage, what the projection keeps is
     * forgotten and the version moves; subscribers are not told (the caller closes them),
     * afterCommitTx is, of a reorg-like commit once `work` committed (replicas).
     */
    replacedBy(work: () => Promise<void>): Promise<void> {
      return serially(async () => {
        reopening = true;
        projection.reset();
        try {
          await work();
          failure = undefined;
        } finally {
          reopening = false;
          head = await storedHead().catch(() => undefined);
          version++;
        }
        await hookAlone(
          { vaults: new Set(vaults.keys()), transactions: [], reorg: true },
          'the restore',
        );
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
    /** The last indexed block (kept in memory); undefined while the index has failed. */
    checkpoint: (): Checkpoint | undefined => (failure ? undefined : head),
    /** Follows the chain in the background. */
    start(): void {
      stopPolling = poll({
        describe: () => (failure ? `rebuilding ${name}` : 'indexing'),
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
      await storage.close();
    },
  };
}
export type Indexer = Awaited<ReturnType<typeof createIndexer>>;
