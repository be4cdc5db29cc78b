import pg from 'pg';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { Store, StoreTx } from '../../src/sandbox/store/index.ts';
import { openPostgresStore } from '../../src/sandbox/store/postgres.ts';
import { freshDatabase } from '../helpers/postgres.ts';
import { STORE_BACKENDS } from '../helpers/store-backends.ts';

/** A promise and the function that settles it. */
function gate() {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { opened, open };
}

/**
 * The store's asynchronous interface, on SQLite and on PostgreSQL: what a transaction that
 * awaits may and may not let others see, and how transactions keep out of each other's way.
 */
describe.each(STORE_BACKENDS.map((backend) => backend()))('the store on $name', (backend) => {
  let store: Store;
  beforeAll(() => backend.start());
  afterAll(() => backend.stop());
  beforeEach(async () => {
    store = await backend.open();
  });
  afterEach(() => store.close());

  it('shows a transaction its own rows, and everyone else only once it has committed', async () => {
    const held = gate();
    const written = gate();
    const running = store.transaction(async (tx) => {
      await tx.meta.set('colour', 'blue');
      expect(await tx.meta.get('colour')).toBe('blue');
      written.open();
      await held.opened;
    });
    await written.opened;
    const whileOpen = await store.meta.get('colour');
    held.open();
    await running;
    expect(whileOpen).toBeUndefined();
    expect(await store.meta.get('colour')).toBe('blue');
  });

  it('runs write transactions one at a time, in arrival order', async () => {
    const events: string[] = [];
    const held = gate();
    const first = store.transaction(async (tx) => {
      events.push('first begins');
      await tx.meta.set('n', '1');
      await held.opened;
      events.push('first ends');
    });
    const second = store.transaction(async (tx) => {
      events.push('second begins');
      // It reads what the first committed: it began after that commit.
      events.push(`second reads ${await tx.meta.get('n')}`);
      await tx.meta.set('n', '2');
    });
    // A write outside any transaction waits its turn too.
    const outside = store.meta.set('n', '3').then(() => events.push('outside written'));
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(events).toEqual(['first begins']);
    held.open();
    await Promise.all([first, second, outside]);
    expect(events).toEqual([
      'first begins',
      'first ends',
      'second begins',
      'second reads 1',
      'outside written',
    ]);
    expect(await store.meta.get('n')).toBe('3');
  });

  it('rolls back every row of a transaction that throws', async () => {
    const failed = store.transaction(async (tx) => {
      await tx.meta.set('kept', 'no');
      throw new Error('refused');
    });
    await expect(failed).rejects.toThrow('refused');
    expect(await store.meta.get('kept')).toBeUndefined();
    // The connection is usable again.
    await store.transaction((tx) => tx.meta.set('kept', 'yes'));
    expect(await store.meta.get('kept')).toBe('yes');
  });

  it('loses only the rows of the record that failed, in a commit with others', async () => {
    const outcomes = await store.commitBlocks(
      [],
      [
        async (tx) => {
          await tx.meta.set('a', '1');
          return 'a';
        },
        async (tx) => {
          await tx.meta.set('b', '1');
          throw new Error('b failed');
        },
        async (tx) => {
          await tx.meta.set('c', '1');
          return 'c';
        },
      ],
    );
    expect(outcomes.map((outcome) => (outcome.ok ? outcome.value : String(outcome.error)))).toEqual(
      ['a', 'Error: b failed', 'c'],
    );
    expect([
      await store.meta.get('a'),
      await store.meta.get('b'),
      await store.meta.get('c'),
    ]).toEqual(['1', undefined, '1']);
  });

  it('refuses, rather than waits for ever, a write outside the transaction made from inside it', async () => {
    await store.transaction(async (tx) => {
      await expect(store.meta.set('outside', 'x')).rejects.toThrow(/use the transaction/);
      await expect(store.transaction(async () => undefined)).rejects.toThrow(/use the transaction/);
      await tx.meta.set('inside', 'x');
    });
    expect(await store.meta.get('inside')).toBe('x');
    expect(await store.meta.get('outside')).toBeUndefined();
  });

  it('refuses a transaction used after it is over', async () => {
    let kept: StoreTx | undefined;
    await store.transaction(async (tx) => {
      kept = tx;
    });
    await expect((kept as StoreTx).meta.set('late', 'x')).rejects.toThrow(/transaction is over/);
    expect(await store.meta.get('late')).toBeUndefined();
  });

  it("moves the agents' version again once a transaction that changed one ends", async () => {
    const held = gate();
    const changed = gate();
    const running = store.transaction(async (tx) => {
      await tx.agents.setTier('0x0000000000000000000000000000000000000001', 'registered');
      changed.open();
      await held.opened;
    });
    await changed.opened;
    // An answer built now, from what is committed, must not be kept as this version's.
    const during = store.agents.version();
    held.open();
    await running;
    expect(store.agents.version()).toBeGreaterThan(during);
  });

  it('commits the commitSoon calls of one turn together, each losing only its own rows', async () => {
    const [kept, failed, alsoKept] = await Promise.allSettled([
      store.commitSoon(async (tx) => {
        await tx.meta.set('soon-a', '1');
        return 'a';
      }),
      store.commitSoon(async (tx) => {
        await tx.meta.set('soon-b', '1');
        throw new Error('b failed');
      }),
      store.commitSoon(async (tx) => {
        await tx.meta.set('soon-c', '1');
        return 'c';
      }),
    ]);
    expect([kept, failed, alsoKept].map((each) => each.status)).toEqual([
      'fulfilled',
      'rejected',
      'fulfilled',
    ]);
    expect([
      await store.meta.get('soon-a'),
      await store.meta.get('soon-b'),
      await store.meta.get('soon-c'),
    ]).toEqual(['1', undefined, '1']);
  });

  it('refuses a database that a newer agentctl made, in the same words on every backend', async () => {
    await store.meta.set('kept', 'yes');
    await store.close();
    await backend.setSchemaVersion(99);
    await expect(backend.reopen()).rejects.toThrow(
      /its schema is version 99, newer than this agentctl knows \(\d+\); upgrade agentctl/,
    );
    // afterEach closes a store: one whose database is at this agentctl's version again.
    await backend.setSchemaVersion(backend.schemaVersion);
    store = await backend.reopen();
    expect(await store.meta.get('kept')).toBe('yes');
  });

  it('opens a database it made again without migrating it twice', async () => {
    await store.meta.set('kept', 'yes');
    await store.close();
    store = await backend.reopen();
    expect(await store.meta.get('kept')).toBe('yes');
  });

  it.runIf(backend.name === 'postgres')(
    'refuses the copies of database files, which are SQLite’s (its snapshots are schemas)',
    async () => {
      await expect(store.copyTo('/nonexistent/copy.db')).rejects.toThrow(
        /is SQLite's: on PostgreSQL a snapshot is a schema/,
      );
      await expect(store.replaceFrom(undefined)).rejects.toThrow(
        /is SQLite's: on PostgreSQL a snapshot is a schema/,
      );
      await expect(store.checkReplaceable('/nonexistent/copy.db')).rejects.toThrow(
        /is SQLite's: on PostgreSQL a snapshot is a schema/,
      );
      await expect(store.sync()).resolves.toBeUndefined();
    },
  );

  it.runIf(backend.name === 'postgres')(
    'does not report as committed a transaction in which a statement failed and was caught',
    async () => {
      await store.nodes.insert(
        { node_id: 'n1', name: 'one', operator_address: '0x01', created_at: 1 },
        'hash-1',
      );
      // PostgreSQL ends the transaction at the failed statement: nothing of it may be claimed.
      const caught = store.transaction(async (tx) => {
        await tx.meta.set('before', 'x');
        await tx.nodes
          .insert({ node_id: 'n2', name: 'two', operator_address: '0x02', created_at: 2 }, 'hash-1')
          .catch(() => undefined);
      });
      await expect(caught).rejects.toThrow(/rolled back/);
      expect(await store.meta.get('before')).toBeUndefined();
      // The write connection is usable again.
      await store.meta.set('after', 'y');
      expect(await store.meta.get('after')).toBe('y');
    },
  );
});

/** Opening a store on PostgreSQL: what SQLite's file and its lock give for free. */
describe('opening the store on PostgreSQL', () => {
  it('migrates a new database once when two stores open it at the same time', async () => {
    const database = await freshDatabase();
    try {
      const stores = await Promise.all([
        openPostgresStore(database.url),
        openPostgresStore(database.url),
      ]);
      await stores[0]?.meta.set('seen', 'by both');
      expect(await stores[1]?.meta.get('seen')).toBe('by both');
      await Promise.all(stores.map((each) => each.close()));
    } finally {
      await database.drop();
    }
  });

  it("orders text byte by byte, as SQLite does, on a database made with a language's collation", async () => {
    const database = await freshDatabase();
    const english = `${database.name}_en`;
    const url = new URL(database.url);
    url.pathname = `/${english}`;
    const admin = new pg.Client({ connectionString: database.url });
    await admin.connect();
    try {
      await admin.query(
        `CREATE DATABASE ${english} TEMPLATE template0 LOCALE 'C' LOCALE_PROVIDER icu ICU_LOCALE 'en-US'`,
      );
      const store = await openPostgresStore(url.toString());
      try {
        for (const id of ['b', 'a1', 'B', 'a-2']) {
          await store.nodes.insert(
            { node_id: id, name: id, operator_address: '0x', created_at: 1 },
            `key-${id}`,
          );
        }
        // English would say a-2, a1, b, B.
        expect((await store.nodes.list()).map((node) => node.node_id)).toEqual([
          'B',
          'a-2',
          'a1',
          'b',
        ]);
      } finally {
        await store.close();
      }
    } finally {
      await admin.query(`DROP DATABASE IF EXISTS ${english} WITH (FORCE)`);
      await admin.end();
      await database.drop();
    }
  });

  it('connects its writer again after the connection was cut', async () => {
    const database = await freshDatabase();
    const admin = new pg.Client({ connectionString: database.url });
    await admin.connect();
    const store = await openPostgresStore(database.url);
    try {
      await store.meta.set('before', '1');
      const cut = await admin.query(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'agentctl writer' AND datname = current_database()",
      );
      expect(cut.rowCount).toBe(1);
      // The write that meets the cut connection may fail (its outcome is the caller's to
      // learn); the one after it runs on a new connection.
      await store.meta.set('during', '1').catch(() => undefined);
      await store.transaction((tx) => tx.meta.set('after', '1'));
      expect(await store.meta.get('after')).toBe('1');
      expect(await store.meta.get('before')).toBe('1');
    } finally {
      await store.close();
      await admin.end();
      await database.drop();
    }
  });

  it('refuses a database it cannot reach, naming it without its password', async () => {
    // Port 1 on loopback: nothing listens there, so the connection is refused at once.
    const opening = openPostgresStore('postgres://sandbox:s3cret@127.0.0.1:1/team');
    await expect(opening).rejects.toThrow(
      /^cannot open postgres:\/\/sandbox:\*\*\*@127\.0\.0\.1:1\/team: /,
    );
    await expect(opening).rejects.not.toThrow(/s3cret/);
  });
});
