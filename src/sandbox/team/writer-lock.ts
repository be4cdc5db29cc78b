import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import type pg from 'pg';
import { StartupError } from '../errors.ts';
import type { Sql, SqlBackend } from '../store/sql.ts';

/**
 * One writer per team sandbox: the writer holds a session-level advisory lock on the very
 * connection its write transactions run on (store/postgres.ts's write connection), taken again
 * on each new connection before anything is written on it.
 *
 * Why the lock on the write connection is the fence. A session's advisory lock lives exactly as
 * long as the session: when the writer's connection is lost (its process killed, the network
 * cut, pg_terminate_backend), PostgreSQL ends the session, rolls back its open transaction and
 * frees the lock in the same step. Every write of this process runs in that session, so no
 * statement of it can reach the database once another writer may hold the lock: a writer paused
 * (SIGSTOP, a long GC) whose session was ended wakes to a dead socket; its COMMIT never reaches a
 * session, and its next write connects again, which runs onWriterConnect first: the lock is held
 * by the new writer, so the write fails and the process is told (onLost). A writer paused while
 * its session lives still holds the lock: no other writer can start, so nothing forks either.
 * Three more things make that whole:
 * - a writer that connects again and finds the lock free checks that the sandbox_writer row is
 *   still its own: a writer that took over and stopped since (freeing the lock) has written,
 *   and this process's state (its chain, its clock) is no longer the database's;
 * - the loss is for good: after it, every write fails, whatever the lock's state is later;
 * - a connection cut on this side only (a proxy, a NAT, a socket error) can leave this writer's
 *   old session alive on the server, holding the lock: the new connection ends that session
 *   (known by its pid and start time, never another's) before it takes the lock, rather than
 *   take its own old session for another writer;
 * - how soon the server ends a dead writer's session bounds failover: a process killed closes
 *   its socket at once, but a host that vanishes leaves the session until TCP keepalives give
 *   up, so the write session asks for short ones (SESSION_KEEPALIVES).
 * The lock fences the store's write connection only. A writer that writes on other connections
 * too (the index's, the chain checkpoints') fences each of their transactions with fence(tx):
 * it reads the sandbox_writer row as this writer's FOR KEY SHARE, so that the transaction fails
 * once another writer has claimed the row, and a new writer's claim (which locks the row FOR
 * UPDATE first) waits for it to end; the holder's own updates of the row (its heartbeat, its
 * URL) do not, so its store and its index never wait on each other.
 * What the lock cannot fence is outside the database: the old writer's anvil and its memory.
 * Neither is acknowledged to anyone (an answer follows its commit), and onLost stops the process.
 * The write connection must reach PostgreSQL directly or through a session pooler: a
 * transaction pooler (PgBouncer's transaction mode) gives the session's lock to whichever
 * server connection ran the statement. PostgreSQL 14 or later (pg_terminate_backend's wait).
 */

/**
 * agentctl's sandbox writer lock, one per database ("agnt" and 2; the migrations' lock is "agnt"
 * and 1). Sandboxes that shared a database in separate schemas would need a key per schema.
 */
export const WRITER_LOCK_KEY = 0x61676e74_02;

/** The session's TCP keepalives: a vanished writer host frees the lock within about 25 s. */
const SESSION_KEEPALIVES = [
  'SET tcp_keepalives_idle = 10',
  'SET tcp_keepalives_interval = 5',
  'SET tcp_keepalives_count = 3',
];

/** How often the holder marks its row as seen (and finds a lost connection while idle). */
export const WRITER_HEARTBEAT_MS = 5000;

/** The sandbox_writer row: who holds the writer lock, where it serves, since when. */
export interface WriterRecord {
  /** The URL the writer serves on (replicas forward writes there); null until it listens. */
  url: string | null;
  host: string;
  pid: number;
  /** ISO 8601: when it took the lock. */
  startedAt: string;
  /** ISO 8601: when it last marked the row (every WRITER_HEARTBEAT_MS while it runs). */
  lastSeenAt: string;
}

/** A start refused because another writer holds the lock (serve exits 3 for it). */
export class WriterLockedError extends StartupError {}

/** Every write of a writer that lost the lock fails with this. */
export class WriterTakenOverError extends Error {}

interface WriterRow {
  writer_id: string;
  url: string | null;
  host: string;
  pid: number;
  started_at: Date;
  last_seen_at: Date;
}

const SELECT_ROW = 'SELECT writer_id, url, host, pid, started_at, last_seen_at FROM sandbox_writer';

function recordOf(row: WriterRow): WriterRecord {
  return {
    url: row.url,
    host: row.host,
    pid: row.pid,
    startedAt: row.started_at.toISOString(),
    lastSeenAt: row.last_seen_at.toISOString(),
  };
}

/** "a writer at URL (host H, pid P) since T", or what is known of a writer without a row. */
function describeWriter(record: WriterRecord | undefined): string {
  if (record === undefined) return 'another writer (it has not said where it serves yet)';
  const where = record.url === null ? 'a writer not listening yet' : `a writer at ${record.url}`;
  return `${where} (host ${record.host}, pid ${record.pid}) since ${record.startedAt}`;
}

/** The row, read on `client`; undefined when there is none, or no table yet (a new database). */
async function rowOn(client: pg.ClientBase): Promise<WriterRow | undefined> {
  const { rows } = await client.query<{ present: boolean }>(
    "SELECT to_regclass('sandbox_writer') IS NOT NULL AS present",
  );
  if (!rows[0]?.present) return undefined;
  return (await client.query<WriterRow>(SELECT_ROW)).rows[0];
}

/**
 * The writer of the sandbox whose database `sql` reads (a replica's store, say): where to
 * forward writes. Undefined when no writer has taken the lock since the database was made, or
 * the last one stopped cleanly; a writer that died leaves its row (its lastSeenAt stops moving).
 */
export async function readWriter(sql: Sql): Promise<WriterRecord | undefined> {
  const row = await sql.get<WriterRow>(SELECT_ROW);
  return row && recordOf(row);
}

export interface WriterLockOptions {
  /** The database's URL as it may be shown (without its password): refusals name it. */
  database: string;
  /**
   * Called once, when another writer took over while this one's connection was lost: every
   * write fails from then on, and the process should stop.
   */
  onLost(error: WriterTakenOverError): void;
  host?: string;
  pid?: number;
  heartbeatMs?: number;
}

export interface WriterLock {
  /** For openPostgresStore(url, lock.hooks). */
  hooks: {
    onWriterConnect(client: pg.ClientBase): Promise<void>;
    onOpen(backend: SqlBackend): Promise<void>;
  };
  /** Records the URL the writer serves on, once it listens: replicas forward writes there. */
  announce(url: string): Promise<void>;
  /**
   * Fences a write transaction on another connection than the store's (the index's, the
   * checkpoints'): call it first in the transaction. Throws (and reports the loss) when the
   * sandbox_writer row is no longer this writer's; else holds the row FOR KEY SHARE until the
   * transaction ends, so that a new writer's claim waits for it.
   */
  fence(tx: Sql): Promise<void>;
  /** The error every write fails with since the lock was lost, if it was. */
  lost(): WriterTakenOverError | undefined;
  /**
   * Stops marking the row and removes it (the writer stops cleanly: replicas then know there
   * is none). Call before closing the store, whose connection's end frees the lock.
   */
  release(): Promise<void>;
}

/**
 * The writer lock of the sandbox on one PostgreSQL database: give `hooks` to openPostgresStore.
 * The store's open is refused (a StartupError naming the holder) while another writer holds the
 * lock.
 *
 * @example
 * const lock = createWriterLock({ database: redactedUrl(url), onLost: () => server.close() });
 * const store = await openPostgresStore(url, lock.hooks);
 * // … once listening:
 * await lock.announce('http://10.0.0.5:8787');
 */
export function createWriterLock(options: WriterLockOptions): WriterLock {
  const writerId = randomUUID();
  const host = options.host ?? hostname();
  const pid = options.pid ?? process.pid;
  let backend: SqlBackend | undefined;
  let connected = false;
  let lostWith: WriterTakenOverError | undefined;
  /** The session that took the lock last: this writer's, whether or not it still lives. */
  let session: { pid: number; start: string } | undefined;
  let heartbeat: NodeJS.Timeout | undefined;

  const lose = (error: WriterTakenOverError): never => {
    if (lostWith === undefined) {
      lostWith = error;
      clearInterval(heartbeat);
      options.onLost(error);
    }
    throw lostWith;
  };

  const takeLock = async (client: pg.ClientBase): Promise<boolean> => {
    const { rows } = await client.query<{ locked: boolean }>(
      'SELECT pg_try_advisory_lock($1) AS locked',
      [WRITER_LOCK_KEY],
    );
    return rows[0]?.locked === true;
  };

  /** Ends this writer's previous session if the server still has it (a cut on this side). */
  const endPreviousSession = async (client: pg.ClientBase): Promise<void> => {
    if (session === undefined) return;
    await client.query(
      `SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity
        WHERE pid = $1 AND backend_start::text = $2`,
      [session.pid, session.start],
    );
  };

  const onWriterConnect = async (client: pg.ClientBase): Promise<void> => {
    if (lostWith) throw lostWith;
    for (const setting of SESSION_KEEPALIVES) await client.query(setting);
    const first = !connected;
    await endPreviousSession(client);
    if (!(await takeLock(client))) {
      // The row may still be this writer's own: the new holder has not written its row yet.
      const found = await rowOn(client);
      const row = found?.writer_id === writerId ? undefined : found;
      const holder = describeWriter(row && recordOf(row));
      if (first) {
        throw new WriterLockedError(
          `the sandbox on ${options.database} is served by ${holder}: one writer at a time; stop it first, or start this one as a replica`,
        );
      }
      return lose(
        new WriterTakenOverError(
          `another writer took over at ${row ? recordOf(row).startedAt : 'an unknown time'}: the sandbox on ${options.database} is served by ${holder}; this writer refuses every write`,
        ),
      );
    }
    connected = true;
    const { rows } = await client.query<{ pid: number; start: string }>(
      `SELECT pid, backend_start::text AS start FROM pg_stat_activity
        WHERE pid = pg_backend_pid()`,
    );
    session = rows[0];
    if (first || backend === undefined) return;
    // The lock was free: still ours only if nobody wrote as the writer meanwhile.
    const row = await rowOn(client);
    if (row?.writer_id !== writerId) {
      await client.query('SELECT pg_advisory_unlock($1)', [WRITER_LOCK_KEY]);
      return lose(
        new WriterTakenOverError(
          `another writer took over at ${row ? recordOf(row).startedAt : 'an unknown time'} while this one's connection was lost: the sandbox on ${options.database} ${row ? `is served by ${describeWriter(recordOf(row))}` : 'has no writer now'}; this writer refuses every write`,
        ),
      );
    }
    await client.query('UPDATE sandbox_writer SET last_seen_at = now() WHERE writer_id = $1', [
      writerId,
    ]);
  };

  const onOpen = async (opened: SqlBackend): Promise<void> => {
    await opened.transaction(async (tx) => {
      // FOR UPDATE: waits for the previous writer's fenced transactions (FOR KEY SHARE) to end,
      // which an update of a column that is not the key would not.
      await tx.get('SELECT 1 AS held FROM sandbox_writer FOR UPDATE');
      await tx.run(
        `INSERT INTO sandbox_writer (writer_id, url, host, pid, started_at, last_seen_at)
         VALUES (?, NULL, ?, ?, now(), now())
         ON CONFLICT (one) DO UPDATE SET writer_id = excluded.writer_id, url = NULL,
           host = excluded.host, pid = excluded.pid, started_at = excluded.started_at,
           last_seen_at = excluded.last_seen_at`,
        writerId,
        host,
        pid,
      );
    });
    backend = opened;
    // A failed mark says nothing more than the writes do: a lost lock is reported by the hook.
    heartbeat = setInterval(() => {
      opened
        .run('UPDATE sandbox_writer SET last_seen_at = now() WHERE writer_id = ?', writerId)
        .catch(() => undefined);
    }, options.heartbeatMs ?? WRITER_HEARTBEAT_MS);
    heartbeat.unref();
  };

  return {
    hooks: { onWriterConnect, onOpen },
    async announce(url) {
      if (lostWith) throw lostWith;
      if (!backend) throw new Error('announce() before the store was opened');
      await backend.run('UPDATE sandbox_writer SET url = ? WHERE writer_id = ?', url, writerId);
    },
    async fence(tx) {
      if (lostWith) throw lostWith;
      // Qualified: another connection may search another schema (the index's sandbox_index).
      const row = await tx.get(
        'SELECT 1 AS ours FROM public.sandbox_writer WHERE writer_id = ? FOR KEY SHARE',
        writerId,
      );
      if (row === undefined) {
        lose(
          new WriterTakenOverError(
            `another writer took over: the sandbox on ${options.database} has another writer (or none) since this one's connection was lost; this writer refuses every write`,
          ),
        );
      }
    },
    lost: () => lostWith,
    async release() {
      clearInterval(heartbeat);
      heartbeat = undefined;
      if (lostWith || !backend) return;
      await backend
        .run('DELETE FROM sandbox_writer WHERE writer_id = ?', writerId)
        .catch(() => undefined);
    },
  };
}
