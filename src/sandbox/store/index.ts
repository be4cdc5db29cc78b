import { dirname } from 'node:path';
import { createAgentStore } from './agents.ts';
import { createChainLogStore } from './chain-log.ts';
import { atThisSchema, checkSameTables, copyDatabase, replaceRows } from './copy.ts';
import { createWalSync, type Database, openDatabase, savepoint, transaction } from './db.ts';
import { createFaucetStore } from './faucet.ts';
import { createIdempotencyStore } from './idempotency.ts';
import { createMetaStore } from './meta.ts';
import { createNodeStore } from './nodes.ts';
import { createNonceStore } from './nonces.ts';
import { createOnboardingStore } from './onboarding.ts';
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

/** The sandbox's off-chain state: one SQLite database, one repository per table group. */
export function openStore(
  path: string,
  options: { durable?: boolean; onSyncFailure?: (error: Error) => void } = {},
) {
  const db: Database = openDatabase(path, options);
  const wal = createWalSync(
    path,
    options.durable ?? true,
    options.onSyncFailure ?? exitOnSyncFailure,
  );
  const meta = createMetaStore(db);
  const agents = createAgentStore(db);
  const chainLog = createChainLogStore(db);
  interface QueuedCommit {
    work: () => unknown;
    resolve(value: unknown): void;
    reject(error: unknown): void;
  }
  const queued: QueuedCommit[] = [];
  const flushQueued = () => {
    const batch = queued.splice(0);
    let outcomes: ReturnType<typeof savepoint>[];
    try {
      outcomes = transaction(db, () => batch.map((commit) => savepoint(db, commit.work)));
    } catch (error) {
      for (const commit of batch) commit.reject(error);
      return;
    }
    wal.sync().then(
      () =>
        batch.forEach((commit, i) => {
          const outcome = outcomes[i] as ReturnType<typeof savepoint>;
          if (outcome.ok) commit.resolve(outcome.value);
          else commit.reject(outcome.error);
        }),
      (error: unknown) => {
        for (const commit of batch) commit.reject(error);
      },
    );
  };
  const nextWalletIndex = () => Number(meta.get('next_wallet_index') ?? FIRST_AGENT_WALLET_INDEX);
  return {
    meta,
    faucet: createFaucetStore(db),
    chainLog,
    /** The lowest HD index an agent wallet may still be given. */
    nextWalletIndex,
    /**
     * Takes HD index `index` (at or past nextWalletIndex(), checked by the wallet allocator)
     * for an agent wallet; call inside a transaction. Committed before the wallet is funded,
     * so a crash mid-registration skips an index rather than reusing one.
     */
    takeWalletIndex(index: number): number {
      meta.set('next_wallet_index', String(Math.max(nextWalletIndex(), index + 1)));
      return index;
    },
    nonces: createNonceStore(db),
    agents,
    onboarding: createOnboardingStore(db),
    nodes: createNodeStore(db),
    idempotency: createIdempotencyStore(db),
    transaction: <T>(work: () => T): T => transaction(db, work),
    /**
     * Runs `work` in one transaction with every other `commitSoon` of this turn of the event
     * loop, each on its own savepoint (one that throws rejects its own promise and loses only
     * its own rows), and resolves once the commit is fsynced.
     */
    commitSoon<T>(work: () => T): Promise<T> {
      return new Promise((resolve, reject) => {
        queued.push({ work, resolve, reject } as QueuedCommit);
        if (queued.length === 1) setImmediate(flushQueued);
      });
    },
    /**
     * Appends `blocks` to the chain log and runs each record on its own savepoint, all in one
     * transaction: a write's off-chain rows are committed exactly when its blocks are. Call
     * `sync` before acknowledging what it committed.
     */
    commitBlocks(blocks: LoggedBlock[], records: Array<() => unknown>): RecordOutcome[] {
      return transaction(db, () => {
        chainLog.append(blocks);
        return records.map((record) => savepoint(db, record));
      });
    },
    /** Writes a consistent copy of the whole database to `path`, a new file. */
    copyTo: (path: string) => copyDatabase(db, path),
    /**
     * Replaces every row with those of the copy at `from` (made by copyTo), or with none (a
     * new sandbox's state), in one transaction, except IDENTITY_META (when set). Throws
     * SchemaMismatchError, having changed nothing, when `from` has other tables.
     */
    replaceFrom(from: string | undefined): void {
      // A new database (serve --from) has no identity yet: it takes the copy's.
      const kept = IDENTITY_META.filter((key) => meta.get(key) !== undefined);
      const replace = (source: string | undefined) =>
        replaceRows(db, source, [
          { table: 'meta', where: `key IN (${kept.map(() => '?').join(', ')})`, params: kept },
          // Snapshot files and restores are not undone by a restore: nor are their keys.
          { table: 'idempotency_keys', where: 'outlives_restore = 1', params: [] },
        ]);
      // A snapshot of an earlier agentctl is brought to this schema first (a copy).
      if (from === undefined) replace(undefined);
      else atThisSchema(from, dirname(path), replace);
      agents.replaced();
    },
    /** Throws SchemaMismatchError unless replaceFrom(from) could put the rows of `from` in. */
    checkReplaceable: (from: string) =>
      atThisSchema(from, dirname(path), (source) => checkSameTables(db, source)),
    /** Resolves once everything committed so far is fsynced. */
    sync: wal.sync,
    async close(): Promise<void> {
      await wal.close();
      db.close();
    },
  };
}
export type Store = ReturnType<typeof openStore>;
