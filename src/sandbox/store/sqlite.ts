import { DatabaseSync, type StatementSync } from 'node:sqlite';
import type { Sql, SqlBackend, SqlTransaction, SqlValue } from './sql.ts';
import type { RecordOutcome } from './types.ts';
import { createWriteTurns, type WhileOpen } from './write-turns.ts';

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
  const turns = createWriteTurns();
  let savepoints = 0;

  /** The write connection, for one transaction's statements. */
  const transactionOf = (whileOpen: WhileOpen): SqlTransaction => ({
    get: (sql, ...params) => whileOpen(() => onWriter.get(sql, ...params)),
    all: (sql, ...params) => whileOpen(() => onWriter.all(sql, ...params)),
    run: (sql, ...params) => whileOpen(() => onWriter.run(sql, ...params)),
    savepoint: (work) => whileOpen(() => savepoint(work)),
  });

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
    run: (sql, ...params) => turns.exclusive(() => onWriter.runSync(sql, params)),
    standalone: {
      get: (sql, ...params) => turns.exclusive(() => onWriter.get(sql, ...params)),
      all: (sql, ...params) => turns.exclusive(() => onWriter.all(sql, ...params)),
      run: (sql, ...params) => turns.exclusive(() => onWriter.runSync(sql, params)),
    },
    transaction<T>(work: (tx: SqlTransaction) => Promise<T>): Promise<T> {
      return turns.transaction(async (whileOpen) => {
        // IMMEDIATE takes SQLite's write lock up front (another process cannot slip in).
        writer.exec('BEGIN IMMEDIATE');
        try {
          const result = await work(transactionOf(whileOpen));
          writer.exec('COMMIT');
          return result;
        } catch (error) {
          if (writer.isTransaction) writer.exec('ROLLBACK');
          throw error;
        }
      });
    },
    async close(): Promise<void> {
      await turns.exclusive(() => reader.close());
    },
  };
  return {
    ...backend,
    /**
     * The read-only connection, for synchronous reads of committed rows. Transitional: the
     * index's readers use it until they have moved onto the Sql interface.
     */
    reader,
    /**
     * Runs `work` on the write connection while no transaction runs and none can start: for
     * what is SQLite's own (copying the file, replacing every row from another file).
     */
    withWriter: <T>(work: (db: DatabaseSync) => T): Promise<T> =>
      turns.exclusive(() => work(writer)),
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
