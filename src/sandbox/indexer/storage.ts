import { chmodSync, copyFileSync } from 'node:fs';
import type { DatabaseSync } from 'node:sqlite';
import { copyDatabase } from '../store/copy.ts';
import { createPostgresBackend } from '../store/postgres.ts';
import type { Sql, SqlTransaction, SqlValue } from '../store/sql.ts';
import { createSqliteBackend, type SqliteBackend } from '../store/sqlite.ts';
import { isConnectionFailure, isIndexFileFailure } from './failure.ts';
import { openIndexDatabase, removeIndexFiles } from './schema.ts';
import {
  EMPTY_INDEX_SQL,
  INDEX_SCHEMA,
  migrateIndexPostgres,
  SET_CHAIN_SQL,
} from './schema-postgres.ts';

/** Where the index is kept. */
export type IndexStorageOptions =
  | { kind: 'sqlite' /** index.db in the state dir. */; path: string }
  | {
      kind: 'postgres';
      /** The sandbox's database: the index's tables are in a schema of their own (INDEX_SCHEMA). */
      url: string;
    };

/**
 * The index's tables on one backend, through the Sql interface: each step of the indexer is
 * one `transaction`, and readers read committed rows (`sql`). What differs between backends is
 * here: opening (and the identity check), starting afresh, copies, and which errors mean what.
 */
export interface IndexStorage {
  readonly kind: IndexStorageOptions['kind'];
  /** Reads of committed rows: never a transaction's rows before its COMMIT. */
  readonly sql: Sql;
  /** One write transaction (one at a time), committed when `work` resolves. */
  transaction<T>(work: (tx: SqlTransaction) => Promise<T>): Promise<T>;
  /**
   * Whether `error` says the stored index cannot be trusted any more (a damaged index.db, a
   * disk that no longer takes it): it is then rebuilt from the chain.
   */
  isDamage(error: unknown): boolean;
  /**
   * Whether `error` says the storage cannot be reached for now (a PostgreSQL connection lost):
   * reads answer IndexUnavailableError while it lasts, and nothing is rebuilt.
   */
  isUnreachable(error: unknown): boolean;
  /** Empties the index (every block is indexed again), or puts the copy at `from` in place. */
  reopen(from?: string): Promise<void>;
  /** Writes a consistent copy of the index to `path` (a new file), between transactions. */
  copyTo(path: string): Promise<void>;
  /**
   * index.db's read-only connection, for the readers not yet on the Sql interface.
   * Transitional; throws on PostgreSQL.
   */
  readonly readerDb: DatabaseSync;
  close(): Promise<void>;
}

/**
 * Opens the index's storage for the chain `identity` names: tables of another chain (or an
 * index.db of another format, or a damaged one) are started afresh, said through `warn`.
 */
export function openIndexStorage(
  options: IndexStorageOptions,
  identity: string,
  warn: (message: string) => void,
): Promise<IndexStorage> {
  return options.kind === 'sqlite'
    ? Promise.resolve(openSqliteIndex(options.path, identity, warn))
    : openPostgresIndex(options.url, identity, warn);
}

/** The readers' side of a backend: reads only. */
function readOnly(on: Sql): Sql {
  return {
    get: <T>(sql: string, ...params: SqlValue[]) => on.get<T>(sql, ...params),
    all: <T>(sql: string, ...params: SqlValue[]) => on.all<T>(sql, ...params),
    run: () => Promise.reject(new Error('the index is read-only to its readers')),
  };
}

/**
 * index.db on SQLite's backend (store/sqlite.ts): steps on the writer connection, one write
 * turn each; reads on the read-only connection, which sees only what is committed (WAL).
 */
function openSqliteIndex(
  path: string,
  identity: string,
  warn: (message: string) => void,
): IndexStorage {
  let writer = openIndexDatabase(path, identity, warn);
  let backend: SqliteBackend = createSqliteBackend(path, writer);
  const closeQuietly = async () => {
    try {
      await backend.close();
    } catch {
      // A failed file may not close cleanly; it is deleted or left next.
    }
    try {
      writer.close();
    } catch {
      // As above.
    }
  };
  return {
    kind: 'sqlite',
    sql: readOnly({
      get: (sql, ...params) => backend.get(sql, ...params),
      all: (sql, ...params) => backend.all(sql, ...params),
      run: (sql, ...params) => backend.run(sql, ...params),
    }),
    transaction: (work) => backend.transaction(work),
    isDamage: isIndexFileFailure,
    isUnreachable: () => false,
    async reopen(from) {
      await closeQuietly();
      removeIndexFiles(path);
      if (from !== undefined) {
        copyFileSync(from, path);
        chmodSync(path, 0o600);
      }
      writer = openIndexDatabase(path, identity, warn);
      backend = createSqliteBackend(path, writer);
    },
    async copyTo(to) {
      await backend.withWriter((db) => copyDatabase(db, to));
    },
    get readerDb() {
      return backend.reader;
    },
    close: closeQuietly,
  };
}

/** What the index on PostgreSQL does otherwise: a snapshot copies its tables into a schema. */
function notOnPostgres(what: string): Promise<never> {
  return Promise.reject(
    new Error(
      `${what} is SQLite's: on PostgreSQL a snapshot copies the index's tables into a schema (snapshots/database.ts)`,
    ),
  );
}

/**
 * The index's tables in their own schema of the PostgreSQL database at `url`: steps on the
 * backend's writer connection, reads on its pool (committed rows only).
 */
async function openPostgresIndex(
  url: string,
  identity: string,
  warn: (message: string) => void,
): Promise<IndexStorage> {
  const backend = await createPostgresBackend(url, {
    schema: INDEX_SCHEMA,
    migrate: (client) => migrateIndexPostgres(client, identity, warn),
  });
  return {
    kind: 'postgres',
    sql: readOnly(backend),
    transaction: (work) => backend.transaction(work),
    isDamage: () => false,
    isUnreachable: isConnectionFailure,
    reopen(from) {
      if (from !== undefined) return notOnPostgres('putting a copy of the index in place');
      return backend.transaction(async (tx) => {
        await tx.run(EMPTY_INDEX_SQL);
        await tx.run(SET_CHAIN_SQL, identity);
      });
    },
    copyTo: () => notOnPostgres('copying the index (a snapshot)'),
    get readerDb(): DatabaseSync {
      throw new Error(
        'the index on PostgreSQL is read through the Sql interface (IndexView.read) only',
      );
    },
    close: () => backend.close(),
  };
}
