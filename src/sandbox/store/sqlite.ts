import { AsyncLocalStorage } from 'node:async_hooks';
import { DatabaseSync, type StatementSync } from 'node:sqlite';
import { createKeyedLock } from '../keyed-lock.ts';
import type { Sql, SqlBackend, SqlTransaction, SqlValue } from './sql.ts';
import type { RecordOutcome } from './types.ts';

/**
 * The SQLite implementation of SqlBackend: node:sqlite, synchronous underneath.
 * Writes go through one connection (`writer`), one transaction at a time (BEGIN IMMEDIATE,
 * under an async lock, since a transaction may now await). Reads made outside a transaction
 * go through a second, read-only connection: WAL gives it the last committed state, never
 * the rows of a transaction still running on the writer.
 */
export function createSqliteBackend(path: string, writer: DatabaseSync) {
  const reader = new DatabaseSync(path, { readOnly: true });
  reader.exec('PRAGMA busy_timeout = 5000');
  const onWriter = statementsOf(writer);
  const onReader = statementsOf(reader);
  const lock = createKeyedLock();
  // The transaction running now, and the async context of each: a write outside its
  // transaction made from inside it would wait for itself.
  let current: object | undefined;
  const within = new AsyncLocalStorage<object>();
  let savepoints = 0;

  /** Runs `work` holding the write lock (refused from inside the transaction holding it). */
  function exclusive<T>(work: () => Promise<T> | T): Promise<T> {
    if (current !== undefined && within.getStore() === current) {
      return Promise.reject(
        new Error('a write outside its transaction was made from inside it: use the transaction'),
      );
    }
    return lock('write', async () => await work());
  }

  /** The connection of the transaction `token`, refused once that transaction is over. */
  const transactionOf = (token: object): SqlTransaction => {
    const open = <T>(then: () => Promise<T>): Promise<T> =>
      current === token
        ? then()
        : Promise.reject(new Error('the transaction is over: its rows were committed'));
    return {
      get: (sql, ...params) => open(() => onWriter.get(sql, ...params)),
      all: (sql, ...params) => open(() => onWriter.all(sql, ...params)),
      run: (sql, ...params) => open(() => onWriter.run(sql, ...params)),
      savepoint: (work) => open(() => savepoint(work)),
    };
  };

  async function savepoint<T>(work: () => Promise<T>): Promise<RecordOutcome<T>> {
    const name = `record_${++savepoints}`;
    writer.exec(`SAVEPOINT ${name}`);
    try {
      const value = await work();
      writer.exec(`RELEASE ${name}`);
      return { ok: true, value };
    } catch (error) {
      writer.exec(`ROLLBACK TO ${name}`);
      writer.exec(`RELEASE ${name}`);
      return { ok: false, error };
    }
  }

  const backend: SqlBackend = {
    ...onReader,
    run: (sql, ...params) => exclusive(() => onWriter.runSync(sql, params)),
    transaction<T>(work: (tx: SqlTransaction) => Promise<T>): Promise<T> {
      return exclusive(async () => {
        const token = {};
        current = token;
        try {
          // IMMEDIATE takes SQLite's write lock up front (another process cannot slip in).
          writer.exec('BEGIN IMMEDIATE');
          try {
            const result = await within.run(token, () => work(transactionOf(token)));
            writer.exec('COMMIT');
            return result;
          } catch (error) {
            if (writer.isTransaction) writer.exec('ROLLBACK');
            throw error;
          }
        } finally {
          current = undefined;
        }
      });
    },
    async close(): Promise<void> {
      await lock('write', async () => {
        reader.close();
      });
    },
  };
  return {
    ...backend,
    /**
     * Runs `work` on the write connection while no transaction runs and none can start: for
     * what is SQLite's own (copying the file, replacing every row from another file).
     */
    withWriter: <T>(work: (db: DatabaseSync) => T): Promise<T> => exclusive(() => work(writer)),
  };
}
export type SqliteBackend = ReturnType<typeof createSqliteBackend>;

/** Prepared statements of one connection, cached by their SQL. */
function statementsOf(db: DatabaseSync): Sql & {
  runSync(sql: string, params: SqlValue[]): { changes: number };
} {
  const cache = new Map<string, StatementSync>();
  const statement = (sql: string) => {
    let prepared = cache.get(sql);
    if (!prepared) {
      prepared = db.prepare(sql);
      cache.set(sql, prepared);
    }
    return prepared;
  };
  const runSync = (sql: string, params: SqlValue[]) => ({
    changes: Number(statement(sql).run(...params).changes),
  });
  return {
    get: async <T>(sql: string, ...params: SqlValue[]) =>
      statement(sql).get(...params) as T | undefined,
    all: async <T>(sql: string, ...params: SqlValue[]) =>
      statement(sql).all(...params) as unknown as T[],
    run: async (sql, ...params) => runSync(sql, params),
    runSync,
  };
}
