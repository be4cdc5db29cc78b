import { closeSync, fsync, openSync } from 'node:fs';
import { dirname } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { fileErrorMessage, isFileError, StartupError } from '../errors.ts';
import { MIGRATIONS, newerSchemaMessage } from './migrations.ts';

export type Database = DatabaseSync;

/**
 * Opens (creating if needed) the sandbox database, checks its pages (`PRAGMA quick_check`) and
 * brings its schema up to date.
 * WAL with synchronous=NORMAL: every commit survives kill -9 (it is in the WAL file before
 * COMMIT returns). A write is acknowledged only after `createWalSync` has also fsynced the
 * WAL, so it survives power loss too; the WAL is append-only, so one fsync makes every
 * earlier commit durable. A temporary sandbox (`durable` false) never fsyncs: its directory
 * is removed at exit anyway.
 * Any failure is a StartupError that names the file: a damaged database is refused at start,
 * rather than found by the first write that touches the damaged page.
 */
export function openDatabase(path: string, { durable = true } = {}): Database {
  let db: DatabaseSync | undefined;
  try {
    // Create the file 0600 ourselves: SQLite would use the umask, and its -wal/-shm copy the mode.
    closeSync(openSync(path, 'a', 0o600));
    db = new DatabaseSync(path);
    db.exec(`
      PRAGMA journal_mode = WAL;
      PRAGMA synchronous = ${durable ? 'NORMAL' : 'OFF'};
      PRAGMA busy_timeout = 5000;
      PRAGMA foreign_keys = ON;
    `);
    checkPages(db, path);
    migrate(db);
    return db;
  } catch (error) {
    try {
      db?.close();
    } catch {
      // Closing what failed to open is best effort.
    }
    throw startupError(error, path);
  }
}

const RESTORE =
  'restore the whole state directory from one backup, or start with a new --state directory';

/** Refuses a database whose pages are damaged, quoting what quick_check found. */
function checkPages(db: DatabaseSync, path: string): void {
  const findings = pageDamage(db);
  if (findings) throw new StartupError(`${path} is damaged (${findings}); ${RESTORE}`);
}

/** How many of quick_check's findings are quoted. */
const FINDINGS_SHOWN = 3;

/**
 * What `PRAGMA quick_check` finds wrong with a database's pages (b-tree order, cell bounds,
 * the free list, pages in no tree), or undefined when nothing: without integrity_check's
 * cross-checking of indexes against tables, so linear in the file's size, a few ms for MBs.
 */
export function pageDamage(db: DatabaseSync): string | undefined {
  const rows = db.prepare(`PRAGMA quick_check(${FINDINGS_SHOWN})`).all() as Array<{
    quick_check: string;
  }>;
  if (rows.length === 1 && rows[0]?.quick_check === 'ok') return undefined;
  const findings = rows
    .flatMap((row) => row.quick_check.split('\n'))
    .filter((line) => line !== '' && !line.startsWith('*** in database'))
    .slice(0, FINDINGS_SHOWN);
  return `PRAGMA quick_check: ${findings.join('; ')}`;
}

/** SQLite's primary result codes that mean the file is not a sound database. */
const SQLITE_CORRUPT = 11;
const SQLITE_NOTADB = 26;

/** Why the database cannot be opened, as a refusal that names it. */
function startupError(error: unknown, path: string): StartupError {
  if (error instanceof StartupError) return error;
  if (isFileError(error)) return new StartupError(fileErrorMessage(error, dirname(path)));
  const { message, errcode } = error as Error & { errcode?: number };
  const primary = typeof errcode === 'number' ? errcode & 0xff : undefined;
  if (primary === SQLITE_CORRUPT || primary === SQLITE_NOTADB) {
    return new StartupError(`${path} is damaged (${message}); ${RESTORE}`);
  }
  return new StartupError(`cannot open ${path}: ${message}`);
}

/** Applies every migration newer than the database's user_version, each in its own transaction. */
export function migrate(db: Database): void {
  const row = db.prepare('PRAGMA user_version').get() as { user_version: number };
  const current = row.user_version;
  if (current > MIGRATIONS.length) {
    throw new Error(newerSchemaMessage(current));
  }
  for (let version = current + 1; version <= MIGRATIONS.length; version++) {
    transaction(db, () => {
      db.exec(MIGRATIONS[version - 1] as string);
      db.exec(`PRAGMA user_version = ${version}`);
    });
  }
}

/**
 * fsyncs the database's WAL on libuv's thread pool, so the main thread never waits on the
 * disk. Callers that arrive while an fsync runs share the next one (group commit): each
 * resolves once an fsync that began after its call has finished.
 * The WAL is opened here, once, at start: a write never needs a new file descriptor, so
 * running out of them (many client sockets) cannot fail a write half-way.
 */
export function createWalSync(
  databasePath: string,
  durable: boolean,
  onFailure: (error: Error) => void,
) {
  // SQLite keeps the WAL file (it truncates, never deletes it) while the database is open.
  const fd = durable ? openSync(`${databasePath}-wal`, 'a', 0o600) : undefined;
  let running: Promise<void> | undefined;
  let next: Promise<void> | undefined;
  const once = async () => {
    try {
      await new Promise<void>((resolve, reject) =>
        fsync(fd as number, (error) => (error ? reject(error) : resolve())),
      );
    } catch (error) {
      // After a failed fsync the kernel may have dropped the pages it could not write, and
      // a later fsync can succeed without them: nothing committed since can be trusted.
      onFailure(error as Error);
      throw error;
    }
  };
  let closed = false;
  const sync = (): Promise<void> => {
    if (fd === undefined) return Promise.resolve();
    // After close the descriptor may already name another file: never fsync it.
    if (closed) return Promise.reject(new Error('the database is closed: serve is shutting down'));
    if (!running) {
      running = once().finally(() => {
        running = undefined;
      });
      return running;
    }
    next ??= running
      .catch(() => undefined)
      .then(() => {
        next = undefined;
        return sync();
      });
    return next;
  };
  return {
    sync,
    async close(): Promise<void> {
      await running?.catch(() => undefined);
      await next?.catch(() => undefined);
      closed = true;
      if (fd !== undefined) closeSync(fd);
    },
  };
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
