import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createPostgresBackend } from '../../../src/sandbox/store/postgres.ts';
import type { SqlBackend } from '../../../src/sandbox/store/sql.ts';
import {
  announceIndexed,
  createCoalescingDelivery,
  type IndexListener,
  listenIndexed,
} from '../../../src/sandbox/team/index-notices.ts';
import { type FreshDatabase, freshDatabase } from '../../helpers/postgres.ts';

/** A promise and the function that settles it. */
function gate() {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { opened, open };
}

/** What a listener was told, and a way to wait for the next of each. */
function recorder() {
  const seen: Array<number | 'gap'> = [];
  const waiters: Array<{ want: number | 'gap'; count: number; open: () => void }> = [];
  const record = (event: number | 'gap') => {
    seen.push(event);
    for (const waiter of waiters.splice(0)) {
      if (seen.filter((each) => each === waiter.want).length >= waiter.count) waiter.open();
      else waiters.push(waiter);
    }
  };
  return {
    seen,
    handlers: { onBlock: (block: number) => record(block), onGap: () => record('gap') },
    /** Resolves once `want` was seen `count` times. */
    seenTimes(want: number | 'gap', count = 1): Promise<void> {
      const waiting = gate();
      if (seen.filter((each) => each === want).length >= count) waiting.open();
      else waiters.push({ want, count, open: waiting.open });
      return waiting.opened;
    },
  };
}

describe('index commits announced through NOTIFY', () => {
  let database: FreshDatabase;
  let writer: SqlBackend;
  let admin: pg.Client;
  const listeners: IndexListener[] = [];

  beforeAll(async () => {
    database = await freshDatabase();
    writer = await createPostgresBackend(database.url);
    admin = new pg.Client({ connectionString: database.url });
    await admin.connect();
  });
  afterEach(async () => {
    for (const listener of listeners.splice(0)) await listener.close();
  });
  afterAll(async () => {
    await admin?.end();
    await writer?.close();
    await database?.drop();
  });

  const listen = (handlers: ReturnType<typeof recorder>['handlers']) => {
    const listener = listenIndexed(database.url, handlers);
    listeners.push(listener);
    return listener;
  };
  const commit = (block: number) => writer.transaction((tx) => announceIndexed(tx, block));
  const listenerSessions = async () =>
    (
      await admin.query<{ pid: number }>(
        `SELECT pid FROM pg_stat_activity
          WHERE application_name = 'agentctl listener' AND datname = current_database()`,
      )
    ).rows;

  it('tells each committed block once committed, in commit order, and never a rolled-back one', async () => {
    const heard = recorder();
    listen(heard.handlers);
    await heard.seenTimes('gap');
    await commit(1);
    await heard.seenTimes(1);
    await expect(
      writer.transaction(async (tx) => {
        await announceIndexed(tx, 2);
        throw new Error('the index commit failed');
      }),
    ).rejects.toThrow('the index commit failed');
    await commit(3);
    await heard.seenTimes(3);

    // A transaction announced 4 first, and committed after another's 5.
    const other = await createPostgresBackend(database.url);
    try {
      const announced = gate();
      const held = gate();
      const holding = other.transaction(async (tx) => {
        await announceIndexed(tx, 4);
        announced.open();
        await held.opened;
      });
      await announced.opened;
      await commit(5);
      await heard.seenTimes(5);
      expect(heard.seen).toEqual(['gap', 1, 3, 5]);
      held.open();
      await holding;
      await heard.seenTimes(4);
      expect(heard.seen).toEqual(['gap', 1, 3, 5, 4]);
    } finally {
      await other.close();
    }
  });

  it('connects again when its connection is ended, and says there may be a gap', async () => {
    const heard = recorder();
    listen(heard.handlers);
    await heard.seenTimes('gap');
    const [session] = await listenerSessions();
    await admin.query('SELECT pg_terminate_backend($1, 10000)', [session?.pid]);
    await heard.seenTimes('gap', 2);
    // It listens again.
    await commit(6);
    await heard.seenTimes(6);
    expect(heard.seen).toEqual(['gap', 'gap', 6]);
  });

  it('leaves no connection open once closed, even while connecting again', async () => {
    const heard = recorder();
    const listener = listen(heard.handlers);
    await heard.seenTimes('gap');
    expect(await listenerSessions()).toHaveLength(1);
    await listener.close();
    expect(await listenerSessions()).toEqual([]);

    const cut = recorder();
    const again = listen(cut.handlers);
    await cut.seenTimes('gap');
    const [session] = await listenerSessions();
    await admin.query('SELECT pg_terminate_backend($1, 10000)', [session?.pid]);
    // Closed while connecting again, or waiting to (or once connected, on a slow machine).
    await again.close();
    expect(await listenerSessions()).toEqual([]);
    const toldBeforeClosed = [...cut.seen];
    await commit(7);
    // Closed: nothing more is told (7 would come before 8 to a listener still there).
    const witness = recorder();
    listen(witness.handlers);
    await witness.seenTimes('gap');
    await commit(8);
    await witness.seenTimes(8);
    expect(cut.seen).toEqual(toldBeforeClosed);
  });
});

describe('listening while the database cannot be reached', () => {
  it('says so, tries again, and closes', async () => {
    const failures: Error[] = [];
    const told = gate();
    // Port 1 on loopback: nothing listens there, so each connection is refused at once.
    const listener = listenIndexed('postgres://sandbox@127.0.0.1:1/team', {
      onBlock: () => undefined,
      onGap: () => undefined,
      onDisconnect: (error) => {
        failures.push(error);
        if (failures.length === 2) told.open();
      },
    });
    await told.opened;
    await listener.close();
    expect(failures.map((error) => (error as NodeJS.ErrnoException).code)).toEqual([
      'ECONNREFUSED',
      'ECONNREFUSED',
    ]);
  });
});

describe('delivering index notices', () => {
  it('keeps one block pending while a handler runs, the highest, whatever arrives', async () => {
    const told: Array<number | 'gap'> = [];
    const held = gate();
    const delivery = createCoalescingDelivery({
      onBlock: async (block) => {
        told.push(block);
        if (block === 1) await held.opened;
      },
      onGap: () => {
        told.push('gap');
      },
    });
    delivery.block(1);
    for (let block = 2; block <= 10_000; block++) delivery.block(block);
    delivery.block(7);
    held.open();
    await delivery.idle();
    expect(told).toEqual([1, 10_000]);
  });

  it('lets a gap, which reads everything committed, stand for the blocks told before it runs', async () => {
    const told: Array<number | 'gap'> = [];
    const held = gate();
    const reading = gate();
    const readDone = gate();
    const delivery = createCoalescingDelivery({
      onBlock: async (block) => {
        told.push(block);
        if (block === 1) await held.opened;
      },
      onGap: async () => {
        told.push('gap');
        reading.open();
        await readDone.opened;
      },
    });
    delivery.block(1);
    delivery.block(2);
    delivery.gap();
    delivery.block(3);
    held.open();
    await reading.opened;
    // Told while the gap's read runs: it may have missed it.
    delivery.block(4);
    readDone.open();
    await delivery.idle();
    expect(told).toEqual([1, 'gap', 4]);
  });

  it('goes on after a handler fails', async () => {
    const told: number[] = [];
    const delivery = createCoalescingDelivery({
      onBlock: (block) => {
        told.push(block);
        if (block === 1) throw new Error('publishing failed');
      },
      onGap: () => undefined,
    });
    delivery.block(1);
    delivery.block(2);
    await delivery.idle();
    expect(told).toEqual([1, 2]);
  });
});
