import { closeSync, openSync } from 'node:fs';
import { DatabaseSync } from 'node:sqlite';
import { MIGRATIONS } from './migrations.ts';

export type Database = DatabaseSync;

/**
 * Opens (creating if needed) the sandbox database and brings its schema up to date.
 * WAL with synchronous=NORMAL: every commit survives kill -9 (it is in the WAL file before
 * COMMIT returns). Commits that acknowledge a write go through `durableTransaction`, which
 * fsyncs the WAL as well, so they also survive power loss; the WAL is append-only, so that
 * fsync makes every earlier commit durable too. A temporary sandbox (`durable` false) never
 * fsyncs: its directory is removed at exit anyway.
 */
export function openDatabase(path: string, { durable = true } = {}): Database {
  // Create the file 0600 ourselves: SQLite would use the umask, and its -wal/-shm copy the mode.
  closeSync(openSync(path, 'a', 0o600));
  const db = new DatabaseSync(path);
  db.exec(`
    PRAGMA journal_mode = WAL;
    PRAGMA synchronous = ${durable ? 'NORMAL' : 'OFF'};
    PRAGMA busy_timeout = 5000;
    PRAGMA foreign_keys = ON;
  `);
  durableDatabases.set(db, durable);
  migrate(db);
  return db;
}

/** Applies every migration newer than the database's user_version, each in its own transaction. */
export function migrate(db: Database): void {
  const row = db.prepare('PRAGMA user_version').get() as { user_version: number };
  const current = row.user_version;
  if (current > MIGRATIONS.length) {
    throw new Error(
      `the database schema is version ${current}, newer than this agentctl knows (${MIGRATIONS.length}); upgrade agentctl`,
    );
  }
  for (let version = current + 1; version <= MIGRATIONS.length; version++) {
    transaction(db, () => {
      db.exec(MIGRATIONS[version - 1] as string);
      db.exec(`PRAGMA user_version = ${version}`);
    });
  }
}

const durableDatabases = new WeakMap<Database, boolean>();

/**
 * `transaction`, with its COMMIT fsynced (synchronous=FULL for this one commit; the
 * setting cannot change inside a transaction). For commits that acknowledge a write.
 */
export function durableTransaction<T>(db: Database, work: () => T): T {
  if (!durableDatabases.get(db)) return transaction(db, work);
  db.exec('PRAGMA synchronous = FULL');
  try {
    return transaction(db, work);
  } finally {
    db.exec('PRAGMA synchronous = NORMAL');
  }
}

/**
 * Runs `work` on a savepoint inside the current transaction: if it throws, only its own
 * changes are undone, and the error is returned instead of thrown.
 */
export function savepoint<T>(
  db: Database,
  work: () => T,
): { ok: true; value: T } | { ok: false; error: unknown } {
  db.exec('SAVEPOINT work');
  try {
    const value = work();
    db.exec('RELEASE work');
    return { ok: true, value };
  } catch (error) {
    db.exec('ROLLBACK TO work');
    db.exec('RELEASE work');
    return { ok: false, error };
  }
}

/**
 * Runs `work` inside BEGIN IMMEDIATE … COMMIT, rolling back if it throws.
 * IMMEDIATE takes the write lock up front, so two writers never both read-then-write.
 */
export function transaction<T>(db: Database, work: () => T): T {
  db.exec('BEGIN IMMEDIATE');
  try {
    const result = work();
    db.exec('COMMIT');
    return result;
  } catch (error) {
    db.exec('ROLLBACK');
    throw error;
  }
}
