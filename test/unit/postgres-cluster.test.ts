import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type FreshDatabase, freshDatabase } from '../helpers/postgres.ts';

/** The tests' PostgreSQL (test/helpers/postgres.ts): a real server, a database per caller. */
describe('the test PostgreSQL', () => {
  let one: FreshDatabase;
  let other: FreshDatabase;
  const clients: pg.Client[] = [];

  async function connect(database: FreshDatabase): Promise<pg.Client> {
    const client = new pg.Client({ connectionString: database.url });
    await client.connect();
    clients.push(client);
    return client;
  }

  beforeAll(async () => {
    one = await freshDatabase();
    other = await freshDatabase();
  });
  afterAll(async () => {
    await Promise.all(clients.map((client) => client.end()));
    await Promise.all([one?.drop(), other?.drop()]);
  });

  it('listens on loopback, and gives each caller a database of its own', async () => {
    expect(new URL(one.url).hostname).toBe('127.0.0.1');
    expect(one.name).not.toBe(other.name);
    const [inOne, inOther] = [await connect(one), await connect(other)];
    expect((await inOne.query('SELECT current_database() AS name')).rows[0].name).toBe(one.name);

    await inOne.query('CREATE TABLE only_in_one (id int)');
    const found = await inOther.query(`SELECT to_regclass('only_in_one') AS found`);
    expect(found.rows[0].found).toBeNull();
  });

  it('keeps a transaction to itself until it commits', async () => {
    const [writer, reader] = [await connect(one), await connect(one)];
    await writer.query('CREATE TABLE deposits (id serial PRIMARY KEY, amount numeric NOT NULL)');

    await writer.query('BEGIN');
    await writer.query('INSERT INTO deposits (amount) VALUES ($1), ($2)', ['10', '20']);
    const inside = await writer.query('SELECT amount FROM deposits ORDER BY id');
    expect(inside.rows.map((row) => row.amount)).toEqual(['10', '20']);
    expect((await reader.query('SELECT amount FROM deposits')).rowCount).toBe(0);
    await writer.query('COMMIT');

    const after = await reader.query('SELECT amount FROM deposits ORDER BY id');
    expect(after.rows.map((row) => row.amount)).toEqual(['10', '20']);
  });

  it('runs the server as a user other than root', async () => {
    const client = await connect(one);
    // The server's own uid: COPY FROM PROGRAM runs the program as the server.
    await client.query('CREATE TEMP TABLE server_uid (uid text)');
    await client.query(`COPY server_uid FROM PROGRAM 'id -u'`);
    const uid = Number((await client.query('SELECT uid FROM server_uid')).rows[0].uid);
    expect(uid).not.toBe(0);
    // Under root, the helper picks the user (postgres, else nobody); otherwise it is ours.
    if (process.getuid?.() !== 0) expect(uid).toBe(process.getuid?.());
  });

  it('drops a database whose connections are still open', async () => {
    const extra = await freshDatabase();
    const left = new pg.Client({ connectionString: extra.url });
    left.on('error', () => {}); // the drop ends this connection from the server's side
    await left.connect();
    await extra.drop();
    const admin = await connect(one);
    const found = await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [extra.name]);
    expect(found.rowCount).toBe(0);
    await left.end().catch(() => {});
  });
});
