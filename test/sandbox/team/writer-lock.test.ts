import { type AddressInfo, connect, createServer, type Socket } from 'node:net';
import pg from 'pg';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { StartupError } from '../../../src/sandbox/errors.ts';
import type { Store } from '../../../src/sandbox/store/index.ts';
import {
  createPostgresBackend,
  openPostgresStore,
  redactedUrl,
} from '../../../src/sandbox/store/postgres.ts';
import {
  createWriterLock,
  readWriter,
  WRITER_LOCK_KEY,
  type WriterLock,
  type WriterTakenOverError,
} from '../../../src/sandbox/team/writer-lock.ts';
import { type FreshDatabase, freshDatabase } from '../../helpers/postgres.ts';

/**
 * One writer per team sandbox, on a real PostgreSQL: the second is refused while the first holds
 * the lock, the lock passes on when the first stops or its session is ended, and a writer whose
 * session was ended while another took over refuses every write after.
 */

interface Writer {
  store: Store;
  lock: WriterLock;
  lost: WriterTakenOverError[];
  /** Resolves once onLost was called. */
  toldLost: Promise<void>;
}

let database: FreshDatabase;
const opened: Writer[] = [];

beforeEach(async () => {
  database = await freshDatabase();
});
afterEach(async () => {
  for (const writer of opened.splice(0)) await writer.store.close().catch(() => undefined);
  await database.drop();
});

/** A writer on the test's database (through `url`, when given), as host `host` and pid `pid`. */
async function openWriter(
  host: string,
  pid: number,
  url = database.url,
  heartbeatMs?: number,
): Promise<Writer> {
  const lost: WriterTakenOverError[] = [];
  let told!: () => void;
  const toldLost = new Promise<void>((resolve) => {
    told = resolve;
  });
  const lock = createWriterLock({
    database: redactedUrl(database.url),
    host,
    pid,
    heartbeatMs,
    onLost: (error) => {
      lost.push(error);
      told();
    },
  });
  const store = await openPostgresStore(url, lock.hooks);
  const writer = { store, lock, lost, toldLost };
  opened.push(writer);
  return writer;
}

async function onDatabase<T extends pg.QueryResultRow>(sql: string): Promise<T[]> {
  const client = new pg.Client({ connectionString: database.url });
  await client.connect();
  try {
    return (await client.query<T>(sql)).rows;
  } finally {
    await client.end();
  }
}

/**
 * Ends the session that holds the writer lock, as a lost connection would, and waits until it
 * is gone (the lock free).
 */
async function endHolderSession(): Promise<void> {
  const high = Math.floor(WRITER_LOCK_KEY / 2 ** 32);
  const low = WRITER_LOCK_KEY % 2 ** 32;
  const rows = await onDatabase<{ ended: boolean }>(
    `SELECT pg_terminate_backend(pid, 10000) AS ended FROM pg_locks
      WHERE locktype = 'advisory' AND granted AND classid = ${high} AND objid = ${low}
        AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`,
  );
  expect(rows).toEqual([{ ended: true }]);
}

/**
 * A TCP proxy in front of the cluster that can drop its clients' side of every connection while
 * keeping the server's: as a NAT or a proxy that forgets a connection, the client sees it reset
 * and the server's session lives on, unaware.
 */
async function oneSidedCuts(target: string) {
  const { hostname, port } = new URL(target);
  const clientSides = new Set<Socket>();
  const serverSides = new Set<Socket>();
  let held: Array<() => void> | undefined;
  const relay = (client: Socket) => {
    const upstream = connect(Number(port), hostname);
    serverSides.add(upstream);
    upstream.on('close', () => serverSides.delete(upstream));
    upstream.on('error', () => undefined);
    // The client's side going away does not end the server's.
    client.pipe(upstream, { end: false });
    upstream.pipe(client);
    upstream.on('close', () => client.destroy());
  };
  const server = createServer((client) => {
    clientSides.add(client);
    client.on('close', () => clientSides.delete(client));
    client.on('error', () => undefined);
    if (held) held.push(() => relay(client));
    else relay(client);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = new URL(target);
  url.port = String((server.address() as AddressInfo).port);
  return {
    url: url.toString(),
    cutClientSides(): void {
      for (const client of clientSides) client.resetAndDestroy();
    },
    /** New connections wait (their client's connect pending) until releaseHeld(). */
    holdNew(): void {
      held = [];
    },
    releaseHeld(): void {
      const waiting = held ?? [];
      held = undefined;
      for (const go of waiting) go();
    },
    async close(): Promise<void> {
      for (const socket of [...clientSides, ...serverSides]) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** How many sessions hold the writer lock. */
async function lockHolders(): Promise<number> {
  const high = Math.floor(WRITER_LOCK_KEY / 2 ** 32);
  const low = WRITER_LOCK_KEY % 2 ** 32;
  const rows = await onDatabase<{ pid: number }>(
    `SELECT pid FROM pg_locks
      WHERE locktype = 'advisory' AND granted AND classid = ${high} AND objid = ${low}
        AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`,
  );
  return rows.length;
}

/** A promise and the function that settles it. */
function gate() {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { opened, open };
}

/** Resolves once `count` sessions wait for a row lock (a state reached, not a time waited). */
async function rowLockWaiters(count: number): Promise<void> {
  for (;;) {
    const rows = await onDatabase<{ waiting: number }>(
      "SELECT count(*) AS waiting FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()",
    );
    if (Number(rows[0]?.waiting) >= count) return;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** The sandbox_writer row as a replica reads it. */
async function writerRow() {
  const reader = await createPostgresBackend(database.url);
  try {
    return await readWriter(reader);
  } finally {
    await reader.close();
  }
}

describe('the writer lock', () => {
  it('refuses a second writer while the first holds it, naming the first', async () => {
    const first = await openWriter('host-a', 101);
    await first.lock.announce('http://10.0.0.5:8787');
    const row = await writerRow();
    expect(row).toMatchObject({ url: 'http://10.0.0.5:8787', host: 'host-a', pid: 101 });

    const refused = openWriter('host-b', 202);
    await expect(refused).rejects.toBeInstanceOf(StartupError);
    await expect(refused).rejects.toThrow(
      `the sandbox on ${database.url} is served by a writer at http://10.0.0.5:8787 (host host-a, pid 101) since ${row?.startedAt}`,
    );
    // The first writes on.
    await first.store.meta.set('still', 'writing');
    expect(await first.store.meta.get('still')).toBe('writing');
    expect(first.lost).toEqual([]);
  });

  it('passes to a new writer once the first has stopped, which removes its row', async () => {
    const first = await openWriter('host-a', 101);
    await first.lock.release();
    await first.store.close();
    expect(await writerRow()).toBeUndefined();

    const second = await openWriter('host-b', 202);
    expect(await writerRow()).toMatchObject({ url: null, host: 'host-b', pid: 202 });
    await second.store.meta.set('written', 'by b');
  });

  it('passes to a new writer once the first closed its store, without a word from the first', async () => {
    const first = await openWriter('host-a', 101);
    await first.store.close();
    // A closed store connects no more: a late write (a heartbeat's) cannot take the lock back.
    await expect(first.store.meta.set('late', 'write')).rejects.toThrow('the store is closed');
    const second = await openWriter('host-b', 202);
    await second.store.meta.set('written', 'by b');
    // The first's row stays until the second's replaces it: a writer that died leaves it too.
    expect(await writerRow()).toMatchObject({ host: 'host-b', pid: 202 });
  });

  it('takes the lock again when its connection comes back and nobody took over', async () => {
    const first = await openWriter('host-a', 101);
    await endHolderSession();
    // The write that finds the connection dead may fail with it; the next connects again.
    await first.store.meta.set('during', 'cut').catch(() => undefined);
    await first.store.meta.set('after', 'cut');
    expect(await first.store.meta.get('after')).toBe('cut');
    expect(first.lost).toEqual([]);
    await expect(openWriter('host-b', 202)).rejects.toThrow(/served by a writer .*host host-a/);
  });

  it('takes the lock again after a cut on its side only, ending its own session the server kept', async () => {
    const proxy = await oneSidedCuts(database.url);
    try {
      const first = await openWriter('host-a', 101, proxy.url);
      await first.store.meta.set('before', 'cut');
      proxy.cutClientSides();
      // The server's side of the old connection lives on, and its session holds the lock.
      expect(await lockHolders()).toBe(1);
      await first.store.meta.set('during', 'cut').catch(() => undefined);
      await first.store.meta.set('after', 'cut');
      expect(await first.store.meta.get('after')).toBe('cut');
      expect(first.lost).toEqual([]);
      expect(await lockHolders()).toBe(1);
      await expect(openWriter('host-b', 202)).rejects.toThrow(/served by a writer .*host host-a/);
    } finally {
      await proxy.close();
    }
  });

  it('passes to a new writer when the first one’s session ends, and the first then refuses every write', async () => {
    const first = await openWriter('host-a', 101);
    await first.lock.announce('http://a:8787');
    await endHolderSession();
    const second = await openWriter('host-b', 202);
    await second.lock.announce('http://b:8787');
    const since = (await writerRow())?.startedAt;

    await first.store.meta.set('during', 'cut').catch(() => undefined);
    const takenOver = new RegExp(
      `^another writer took over at ${since}: the sandbox on .* is served by a writer at http://b:8787 \\(host host-b, pid 202\\)`,
    );
    await expect(first.store.meta.set('after', 'cut')).rejects.toThrow(takenOver);
    await expect(first.store.transaction((tx) => tx.meta.set('in', 'tx'))).rejects.toThrow(
      takenOver,
    );
    await expect(first.lock.announce('http://a:8787')).rejects.toThrow(takenOver);
    expect(first.lost).toHaveLength(1);
    expect(first.lost[0]?.message).toMatch(takenOver);

    // The second writer's writes are the only ones.
    await second.store.meta.set('after', 'b');
    expect(await second.store.meta.get('after')).toBe('b');
    expect(await second.store.meta.get('during')).toBeUndefined();
  });

  it('tells an idle writer that another took over, from its heartbeat', async () => {
    const proxy = await oneSidedCuts(database.url);
    try {
      const first = await openWriter('host-a', 101, proxy.url, 20);
      // Its heartbeat connects again only once the second writer holds the lock.
      proxy.holdNew();
      await endHolderSession();
      await openWriter('host-b', 202);
      proxy.releaseHeld();
      await first.toldLost;
      expect(first.lost).toHaveLength(1);
      expect(first.lost[0]?.message).toMatch(/^another writer took over at .*host host-b, pid 202/);
    } finally {
      await proxy.close();
    }
  });

  it('fences the writer’s transactions on other connections: a new writer’s claim waits for them, and they fail after it', async () => {
    const first = await openWriter('host-a', 101);
    // A connection of its own, as the index's or the checkpoints' are.
    const other = await createPostgresBackend(database.url);
    try {
      const events: string[] = [];
      const fenced = gate();
      const held = gate();
      const inFlight = other.transaction(async (tx) => {
        await first.lock.fence(tx);
        await tx.run(
          "INSERT INTO meta (key, value) VALUES ('index', 'block 1') ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        );
        fenced.open();
        await held.opened;
      });
      await fenced.opened;
      await endHolderSession();
      const opening = openWriter('host-b', 202).then((second) => {
        events.push('second opened');
        return second;
      });
      await rowLockWaiters(1);
      // The second's claim waits for the fenced transaction: it opens only once that commits.
      // (Which of the two sockets' answers JavaScript sees first after the commit is not said.)
      events.push('first lets its transaction commit');
      held.open();
      await inFlight;
      const second = await opening;
      expect(events).toEqual(['first lets its transaction commit', 'second opened']);
      expect(await second.store.meta.get('index')).toBe('block 1');
      // The holder's own marks do not wait for its fenced transactions.
      const own = gate();
      const ownHeld = gate();
      const secondsTx = other.transaction(async (tx) => {
        await second.lock.fence(tx);
        own.open();
        await ownHeld.opened;
      });
      await own.opened;
      await second.lock.announce('http://b:8787');
      ownHeld.open();
      await secondsTx;

      const stale = other.transaction(async (tx) => {
        await first.lock.fence(tx);
        await tx.run(
          "INSERT INTO meta (key, value) VALUES ('index', 'block 2') ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        );
      });
      await expect(stale).rejects.toThrow(/^another writer took over/);
      expect(first.lost).toHaveLength(1);
      expect(await second.store.meta.get('index')).toBe('block 1');
    } finally {
      await other.close();
    }
  });

  it('refuses every write after another writer took over and stopped, though the lock is free', async () => {
    const first = await openWriter('host-a', 101);
    await endHolderSession();
    const second = await openWriter('host-b', 202);
    await second.store.meta.set('written', 'by b');
    await second.lock.release();
    await second.store.close();

    await first.store.meta.set('during', 'cut').catch(() => undefined);
    await expect(first.store.meta.set('after', 'cut')).rejects.toThrow(
      /^another writer took over at an unknown time while this one's connection was lost: the sandbox on .* has no writer now/,
    );
    expect(first.lost).toHaveLength(1);
    // The lock is free again: the first let it go rather than hold it while refusing.
    const third = await openWriter('host-c', 303);
    await third.store.meta.set('written', 'by c');
  });
});
