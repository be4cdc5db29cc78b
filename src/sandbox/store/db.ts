import { closeSync, openSync } from 'node:fs';
import { DatabaseSync } from 'node:sqlite';
import { MIGRATIONS } from './migrations.ts';

export type Database = DatabaseSync;

/**
 * Opens (creating if needed) the sandbox database and brings its schema up to date.
 * WAL with synchronous=FULL: a write acknowledged to a client survives power loss and kill -9.
 */
export function openDatabase(path: string): Database {
  // Create the file 0600 ourselves: SQLite would use the umask, and its -wal/-shm copy the mode.
  closeSync(openSync(path, 'a', 0o600));
  const db = new DatabaseSync(path);
  db.exec(`
    PRAGMA journal_mode = WAL;
    PRAGMA synchronous = FULL;
    PRAGMA busy_timeout = 5000;
    PRAGMA foreign_keys = ON;
  `);
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
