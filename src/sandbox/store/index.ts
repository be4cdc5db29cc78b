import { dirname } from 'node:path';
import { type AgentChanges, createAgentStore } from './agents.ts';
import { createChainLogStore } from './chain-log.ts';
import { atThisSchema, checkSameTables, copyDatabase, replaceRows } from './copy.ts';
import { createWalSync, type Database, openDatabase } from './db.ts';
import { createFaucetStore } from './faucet.ts';
import {
  createIdempotencyStore,
  type IdempotencyRow,
  idempotencyRowParams,
  UPSERT_IDEMPOTENCY_ROW,
} from './idempotency.ts';
import { createMetaStore } from './meta.ts';
import { createNodeStore } from './nodes.ts';
import { createNonceStore } from './nonces.ts';
import { createOnboardingStore } from './onboarding.ts';
import { createRateCountStore } from './rate-counts.ts';
import type { Sql, SqlBackend, SqlTransaction } from './sql.ts';
import { createSqliteBackend } from './sqlite.ts';
import type { LoggedBlock, RecordOutcome } from './types.ts';

/**
 * What makes the database this sandbox's, and its admin token: kept as they are when a
 * snapshot's rows replace the rest.
 */
export const IDENTITY_META = ['sandbox_id', 'mnemonic_fingerprint', 'admin_token_sha256'];

/** HD index of the first agent wallet (m/44'/60'/0'/0/1000); lower ones are the sandbox's own. */
export const FIRST_AGENT_WALLET_INDEX = 1000;

/**
 * What a failed fsync does by default: stop at once, like PostgreSQL. The next start rebuilds
 * from what is on disk; carrying on could answer writes stacked on ones the disk lost.
 */
function exitOnSyncFailure(error: Error): void {
  process.stderr.write(
    `agentctl: fsync of the database failed (${error.message}); stopping, so that nothing is acknowledged that the disk may not hold\n`,
  );
  process.exit(1);
}

/** The repositories, on one connection: the store's (reads see what is committed) or a transaction's. */
function repositories(sql: Sql, agentChanges: AgentChanges) {
  const meta = createMetaStore(sql);
  const nextWalletIndex = async () =>
    Number((await meta.get('next_wallet_index')) ?? FIRST_AGENT_WALLET_INDEX);
  return {
    meta,
    faucet: createFaucetStore(sql),
    chainLog: createChainLogStore(sql),
    /** The lowest HD index an agent wallet may still be given. */
    nextWalletIndex,
    /**
     * Takes HD index `index` (at or past nextWalletIndex(), checked by the wallet allocator)
     * for an agent wallet; call inside a transaction. Committed before the wallet is funded,
     * so a crash mid-registration skips an index rather than reusing one.
     */
    async takeWalletIndex(index: number): Promise<number> {
      await meta.set('next_wallet_index', String(Math.max(await nextWalletIndex(), index + 1)));
      return index;
    },
    nonces: createNonceStore(sql),
    agents: createAgentStore(sql, agentChanges),
    onboarding: createOnboardingStore(sql),
    nodes: createNodeStore(sql),
    idempotency: createIdempotencyStore(sql),
  };
}
export type Repositories = ReturnType<typeof repositories>;

/**
 * The repositories bound to one write transaction: what they read includes its own rows, and
 * what they write commits with it. `savepoint` runs a record that may fail alone.
 */
export interface StoreTx extends Repositories {
  savepoint<T>(work: (tx: StoreTx) => Promise<T>): Promise<RecordOutcome<T>>;
}

/** What a record run in a commit does: its rows go through `tx`. */
export type StoreRecord<T = unknown> = (tx: StoreTx) => Promise<T>;

/**
 * What only one backend can do, or a backend's own way of doing it: given to createStore.
 * Snapshots are SQLite files for now, so copyTo, replaceFrom and checkReplaceable are SQLite's.
 */
export interface BackendSpecifics {
  /** Which database the rows are in. */
  kind: 'sqlite' | 'postgres';
  /** Resolves once everything committed so far is durable. */
  sync(): Promise<void>;
  /** Writes a consistent copy of the whole database to `path`, a new file. */
  copyTo(to: string): Promise<void>;
  /**
   * Replaces every row with those of the copy at `from` (made by copyTo), or with none (a
   * new sandbox's state), in one transaction, except IDENTITY_META (when set), with `keys` put
   * in by the same transaction. Throws SchemaMismatchError, having changed nothing, when
   * `from` has other tables.
   */
  replaceFrom(from: string | undefined, keys: IdempotencyRow[]): Promise<void>;
  /** Throws SchemaMismatchError unless replaceFrom(from) could put the rows of `from` in. */
  checkReplaceable(from: string): Promise<void>;
  /** Closes what the backend holds beyond its connections (the WAL's descriptor, say). */
  close(): Promise<void>;
}

/**
 * The sandbox's off-chain state: one SQLite database, one repository per table group, behind
 * the asynchronous interface PostgreSQL shares (sql.ts; openPostgresStore in postgres.ts).
 */
export function openStore(
  path: string,
  options: { durable?: boolean; onSyncFailure?: (error: Error) => void } = {},
) {
  const db: Database = openDatabase(path, options);
  const backend = createSqliteBackend(path, db);
  const wal = createWalSync(
    path,
    options.durable ?? true,
    options.onSyncFailure ?? exitOnSyncFailure,
  );
  // Snapshots are files: each of these runs on the write connection while no transaction does.
  const specifics: BackendSpecifics = {
    kind: 'sqlite',
    sync: wal.sync,
    copyTo: (to) => backend.withWriter((writer) => copyDatabase(writer, to)),
    replaceFrom: (from, keys) =>
      backend.withWriter((writer) => {
        // A new database (serve --from) has no identity yet: it takes the copy's.
        const kept = IDENTITY_META.filter(
          (key) => writer.prepare('SELECT 1 FROM meta WHERE key = ?').get(key) !== undefined,
        );
        const replace = (source: string | undefined) =>
          replaceRows(
            writer,
            source,
            [
              { table: 'meta', where: `key IN (${kept.map(() => '?').join(', ')})`, params: kept },
              // Snapshot files and restores are not undone by a restore: nor are their keys.
              { table: 'idempotency_keys', where: 'outlives_restore = 1', params: [] },
              // Nor are the requests counted: a restore takes no counts, and keeps today's.
              { table: 'rate_counts', where: '1 = 1', params: [] },
            ],
            (db) => {
              const upsert = db.prepare(UPSERT_IDEMPOTENCY_ROW);
              for (const key of keys) upsert.run(...idempotencyRowParams(key));
            },
          );
        // A snapshot of an earlier agentctl is brought to this schema first (a copy).
        if (from === undefined) replace(undefined);
        else atThisSchema(from, dirname(path), replace);
      }),
    checkReplaceable: (from) =>
      backend.withWriter((writer) =>
        atThisSchema(from, dirname(path), (source) => checkSameTables(writer, source)),
      ),
    async close() {
      await wal.close();
      db.close();
    },
  };
  return createStore(backend, specifics);
}

/** The store (repositories, transactions, batched commits) on one backend. */
export function createStore(backend: SqlBackend, specifics: BackendSpecifics) {
  const agentChanges: AgentChanges = { count: 0 };
  // takeWalletIndex reads then writes: only inside a transaction (tx.takeWalletIndex).
  const { takeWalletIndex: _insideTransactionsOnly, ...repos } = repositories(
    backend,
    agentChanges,
  );
  const bind = (sql: SqlTransaction): StoreTx => {
    const tx: StoreTx = {
      ...repositories(sql, agentChanges),
      savepoint: (work) => sql.savepoint(() => work(tx)),
    };
    return tx;
  };
  const transaction = async <T>(work: (tx: StoreTx) => Promise<T>): Promise<T> => {
    const before = agentChanges.count;
    try {
      return await backend.transaction((sql) => work(bind(sql)));
    } finally {
      // Moved again once committed (or rolled back): an answer built from what was committed
      // before, while the transaction ran, is then not kept as the newer version's.
      if (agentChanges.count !== before) agentChanges.count++;
    }
  };

  interface QueuedCommit {
    work: StoreRecord;
    resolve(value: unknown): void;
    reject(error: unknown): void;
  }
  const queued: QueuedCommit[] = [];
  const flushQueued = async () => {
    const batch = queued.splice(0);
    let outcomes: RecordOutcome[];
    try {
      outcomes = await transaction(async (tx) => {
        const done: RecordOutcome[] = [];
        for (const commit of batch) done.push(await tx.savepoint(commit.work));
        return done;
      });
    } catch (error) {
      for (const commit of batch) commit.reject(error);
      return;
    }
    specifics.sync().then(
      () =>
        batch.forEach((commit, i) => {
          const outcome = outcomes[i] as RecordOutcome;
          if (outcome.ok) commit.resolve(outcome.value);
          else commit.reject(outcome.error);
        }),
      (error: unknown) => {
        for (const commit of batch) commit.reject(error);
      },
    );
  };
  return {
    ...repos,
    /** Which database the rows are in. */
    kind: specifics.kind,
    /**
     * The backend itself, for what keeps tables of its own in the same database (on
     * PostgreSQL: the chain's checkpoints, the sealed mnemonic, the snapshots' schemas).
     */
    sql: backend,
    /**
     * Runs `work`, which replaces rows wholesale (a restore on PostgreSQL: snapshots/database.ts),
     * in one write transaction; then every agent row counts as changed (what was cached from
     * them is stale), whether it committed or not.
     */
    async replacedBy(work: (tx: SqlTransaction) => Promise<void>): Promise<void> {
      try {
        await backend.transaction(work);
      } finally {
        repos.agents.replaced();
      }
    },
    /**
     * The rate limits' counts (when the server counts in the database): each statement commits
     * on its own, never in a transaction, and on PostgreSQL without waiting for the writer.
     */
    rateCounts: createRateCountStore(backend.standalone),
    /** Runs `work` in one write transaction (one at a time), committed when it resolves. */
    transaction,
    /**
     * Runs `work` in one transaction with every other `commitSoon` of this turn of the event
     * loop, each on its own savepoint (one that throws rejects its own promise and loses only
     * its own rows), and resolves once the commit is fsynced.
     */
    commitSoon<T>(work: (tx: StoreTx) => Promise<T>): Promise<T> {
      return new Promise((resolve, reject) => {
        queued.push({ work, resolve, reject } as QueuedCommit);
        if (queued.length === 1) setImmediate(() => void flushQueued());
      });
    },
    /**
     * Appends `blocks` to the chain log and runs each record on its own savepoint, all in one
     * transaction: a write's off-chain rows are committed exactly when its blocks are. Call
     * `sync` before acknowledging what it committed.
     */
    commitBlocks(blocks: LoggedBlock[], records: StoreRecord[]): Promise<RecordOutcome[]> {
      return transaction(async (tx) => {
        await tx.chainLog.append(blocks);
        const outcomes: RecordOutcome[] = [];
        for (const record of records) outcomes.push(await tx.savepoint(record));
        return outcomes;
      });
    },
    /** Writes a consistent copy of the whole database to `path`, a new file (SQLite only). */
    copyTo: (to: string): Promise<void> => specifics.copyTo(to),
    /**
     * Replaces every row with those of the copy at `from` (made by copyTo), or with none (a
     * new sandbox's state), in one transaction, except IDENTITY_META (when set), with the
     * idempotency `keys` put in by the same transaction (a restore's own: see
     * snapshots/index.ts). Throws SchemaMismatchError, having changed nothing, when `from` has
     * other tables.
     */
    async replaceFrom(from: string | undefined, keys: IdempotencyRow[] = []): Promise<void> {
      await specifics.replaceFrom(from, keys);
      repos.agents.replaced();
    },
    /** Throws SchemaMismatchError unless replaceFrom(from) could put the rows of `from` in. */
    checkReplaceable: (from: string): Promise<void> => specifics.checkReplaceable(from),
    /** Resolves once everything committed so far is durable (fsynced, on SQLite). */
    sync: (): Promise<void> => specifics.sync(),
    async close(): Promise<void> {
      await backend.close();
      await specifics.close();
    },
  };
}
export type Store = ReturnType<typeof createStore>;
