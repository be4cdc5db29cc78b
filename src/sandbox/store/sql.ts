import type { RecordOutcome } from './types.ts';

/**
 * The backend interface the repositories use: SQL written once, with `?` placeholders, run
 * asynchronously. SQLite (sqlite.ts) and PostgreSQL (postgres.ts, which numbers the
 * placeholders) implement it. Keep statements portable (ON CONFLICT, count(*) FILTER, no
 * SQLite-only functions); where one cannot be, say so beside it. Two differences remain for
 * callers to mind:
 * - inside a transaction, a statement that fails ends the whole transaction on PostgreSQL
 *   (SQLite undoes the statement alone): run what may fail, and carry on after, on a savepoint;
 * - sum() of an integer column is a string on PostgreSQL (NUMERIC): convert it with Number().
 */

/** What a statement's `?` may be bound to. */
export type SqlValue = string | number | bigint | null | Uint8Array;

export interface Sql {
  /** The first row, or undefined. */
  get<T>(sql: string, ...params: SqlValue[]): Promise<T | undefined>;
  all<T>(sql: string, ...params: SqlValue[]): Promise<T[]>;
  run(sql: string, ...params: SqlValue[]): Promise<{ changes: number }>;
}

/** A connection inside a write transaction: every read and write sees the transaction's rows. */
export interface SqlTransaction extends Sql {
  /**
   * Runs `work` on a savepoint: if it throws, only its own changes are undone, and the error
   * is returned instead of thrown.
   */
  savepoint<T>(work: () => Promise<T>): Promise<RecordOutcome<T>>;
}

export interface SqlBackend extends Sql {
  /**
   * Runs `work` in one write transaction, committed when it resolves and rolled back when it
   * throws. Write transactions run one at a time; nothing else writes meanwhile. Reads made
   * outside it (through this object) see only what is committed.
   */
  transaction<T>(work: (tx: SqlTransaction) => Promise<T>): Promise<T>;
  /**
   * Statements that may write, each committed on its own, for rows no transaction reads and
   * whose loss in a crash costs nothing (rate limit counts): `get` may run an INSERT …
   * RETURNING. On SQLite they take their turn on the write connection; on PostgreSQL they run
   * on connections of their own, without waiting for the write transactions, with timeouts
   * (a database that cannot be reached fails them; it never holds them).
   */
  standalone: Sql;
  close(): Promise<void>;
}
