import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_SNAPSHOTS } from '../../src/api/schemas/index.ts';
import { databaseMnemonic } from '../../src/sandbox/chain/mnemonic.ts';
import { INDEX_SCHEMA, INDEX_TABLES } from '../../src/sandbox/indexer/schema-postgres.ts';
import { SANDBOX_SECRET_ENV } from '../../src/sandbox/sandbox-secret.ts';
import { importIntoDatabase } from '../../src/sandbox/snapshots/database.ts';
import { importExport, readExport } from '../../src/sandbox/snapshots/export-file.ts';
import { resumeRestore } from '../../src/sandbox/snapshots/index.ts';
import { openStore } from '../../src/sandbox/store/index.ts';
import { openPostgresStore } from '../../src/sandbox/store/postgres.ts';
import { call, chainAgent, chainReader } from '../helpers/chain.ts';
import { type FreshDatabase, freshDatabase } from '../helpers/postgres.ts';
import {
  ADMIN_TOKEN,
  admin,
  createTestSandbox,
  TEST_SANDBOX_SECRET,
  type TestSandbox,
} from '../helpers/sandbox.ts';
import { until } from '../helpers/serve.ts';

/**
 * Snapshots of a sandbox kept in PostgreSQL (snapshots/database.ts): each a schema, taken and
 * restored in one transaction each, on a real database and a real anvil. A restore puts every
 * table of the sandbox's and of the index's back as it was, the chain with them; a restore cut
 * off half way (its connection terminated) leaves the state as it was before.
 */
let database: FreshDatabase;
let sandbox: TestSandbox;
/** A connection of the test's own, to read and lock what the sandbox's connections write. */
let client: pg.Client;

beforeAll(async () => {
  database = await freshDatabase();
  // No automatic checkpoint: the rows compared stay as the requests left them.
  sandbox = await createTestSandbox({ database: database.url, checkpointAfterMs: 3_600_000 });
  client = new pg.Client({ connectionString: database.url });
  await client.connect();
});

afterAll(async () => {
  await client?.end();
  await sandbox?.close();
  await database?.drop();
});

/** Tables whose rows a restore does not take from the snapshot (or that a start rewrites). */
const NOT_COMPARED = new Set([
  'schema_version',
  'snapshots',
  'chain_checkpoints',
  'wallet_mnemonic',
  'rate_counts',
  'sandbox_writer',
  // Emptied in the snapshot: it starts at its block, whose chain is its checkpoint.
  'chain_blocks',
]);

/** Every row of the sandbox's tables and of the index's, each table's in a fixed order. */
async function allRows(): Promise<Record<string, unknown[]>> {
  const { rows: tables } = await client.query<{ table_name: string }>(
    `SELECT table_name FROM information_schema.tables
      WHERE table_schema = 'public' AND table_type = 'BASE TABLE' ORDER BY table_name`,
  );
  const rows: Record<string, unknown[]> = {};
  const read = async (qualified: string) =>
    (await client.query(`SELECT * FROM ${qualified} ORDER BY 1, 2`)).rows.map((row) =>
      JSON.stringify(row),
    );
  for (const { table_name: table } of tables) {
    if (NOT_COMPARED.has(table)) continue;
    rows[table] = await read(`public."${table}"`);
  }
  // The pointer moves to the snapshot's block (its checkpoint), wherever it was.
  rows.meta = (rows.meta as string[]).filter((row) => !row.includes('"chain_checkpoint"'));
  // Keys of snapshots and restores outlive a restore: compared apart.
  rows.idempotency_keys = (rows.idempotency_keys as string[]).filter(
    (row) => !/"outlives_restore":"?1"?[,}]/.test(row),
  );
  for (const table of INDEX_TABLES)
    rows[`index.${table}`] = await read(`${INDEX_SCHEMA}."${table}"`);
  return rows;
}

/** What a client reads: the data API, Part A, GraphQL and the chain. */
async function reads(apiKey: string) {
  const get = async (url: string) => (await sandbox.app.inject({ method: 'GET', url })).json();
  return {
    vaults: await get('/v1/vaults'),
    transactions: await get('/v1/transactions'),
    position: (await call(sandbox, apiKey, 'GET', '/api/v1/agent/vault/positions')).json(),
    graphql: (
      await sandbox.app.inject({
        method: 'POST',
        url: '/graphql',
        payload: { query: '{ vaults { address tvl totalShares pricePerShare } }' },
      })
    ).json(),
    block: Number(await chainReader(sandbox).getBlockNumber()),
  };
}

const keyed = (method: 'POST' | 'DELETE', url: string, key: string, payload?: object) =>
  sandbox.app.inject({
    method,
    url,
    headers: { 'x-admin-token': ADMIN_TOKEN, 'idempotency-key': key },
    ...(payload && { payload }),
  });
const deposit = (apiKey: string, amount: number) =>
  call(sandbox, apiKey, 'POST', '/api/v1/agent/vault/deposit', {
    vault_id: 'moderate',
    amount_usdc: amount,
  });
const restore = (name: string) => admin(sandbox.app, 'POST', `/sandbox/snapshots/${name}/restore`);
const snapshotSchemas = async () =>
  (
    await client.query<{ nspname: string }>(
      "SELECT nspname FROM pg_namespace WHERE nspname LIKE 'snapshot\\_%' ORDER BY nspname",
    )
  ).rows.map((row) => row.nspname);
/** Waits until the onboarder has funded every agent (its outbox is empty). */
const onboarded = () =>
  until(
    async () =>
      Number((await client.query('SELECT count(*) AS n FROM onboarding_queue')).rows[0].n) === 0,
  );

describe('snapshots in PostgreSQL', () => {
  let alice: Awaited<ReturnType<typeof chainAgent>>;
  let atSnapshot: { rows: Record<string, unknown[]>; reads: Awaited<ReturnType<typeof reads>> };

  it('takes a snapshot as a schema, listed with its size', async () => {
    alice = await chainAgent(sandbox, 'established');
    expect((await deposit(alice.apiKey, 100)).statusCode).toBe(200);
    await onboarded();
    atSnapshot = { rows: await allRows(), reads: await reads(alice.apiKey) };
    const taken = await keyed('POST', '/sandbox/snapshots', 'take-base', { name: 'base' });
    expect(taken.statusCode, taken.body).toBe(200);
    expect(taken.json().block_number).toBe(atSnapshot.reads.block);
    expect(await snapshotSchemas()).toHaveLength(1);
    const listed = (await admin(sandbox.app, 'GET', '/sandbox/snapshots')).json().snapshots;
    expect(listed.map((each: { name: string }) => each.name)).toEqual(['genesis', 'base']);
    expect(taken.json().size_bytes).toBeGreaterThan(0);
    expect(listed[1].size_bytes).toBeGreaterThan(0);
    // The index's tables were copied (it was at the block dumped), and the dump beside them.
    const { rows } = await client.query('SELECT * FROM snapshots');
    expect(rows).toMatchObject([{ name: 'base', indexed: true }]);
    const copied = await client.query(
      `SELECT count(*) AS n FROM ${rows[0].schema_name}.chain_checkpoints WHERE block_number = $1`,
      [atSnapshot.reads.block],
    );
    expect(Number(copied.rows[0].n)).toBe(1);
  });

  it('restores every table, the index and the chain as they were, and keeps the keys that outlive a restore', async () => {
    // Changes of every kind after it: an agent, a deposit, a funded address, a checkpoint.
    const bob = await chainAgent(sandbox);
    expect((await deposit(alice.apiKey, 50)).statusCode).toBe(200);
    const funded = await admin(sandbox.app, 'POST', '/sandbox/fund', {
      address: '0x00000000000000000000000000000000c0ffee01',
      usdc: 5,
    });
    expect(funded.statusCode, funded.body).toBe(200);
    expect((await admin(sandbox.app, 'POST', '/sandbox/checkpoint')).statusCode).toBe(200);
    await onboarded();
    expect(await allRows()).not.toEqual(atSnapshot.rows);

    const restored = await keyed('POST', '/sandbox/snapshots/base/restore', 'restore-base');
    expect(restored.statusCode, restored.body).toBe(200);
    expect(restored.json().block_number).toBe(atSnapshot.reads.block);
    expect(await allRows()).toEqual(atSnapshot.rows);
    expect(await reads(alice.apiKey)).toEqual(atSnapshot.reads);
    // Bob was registered after it: his key is unknown again.
    expect(
      (await call(sandbox, bob.apiKey, 'GET', '/api/v1/agent/vault/positions')).statusCode,
    ).toBe(401);
    // The snapshot's key and the restore's were kept: each replays its answer.
    const again = await keyed('POST', '/sandbox/snapshots', 'take-base', { name: 'base' });
    expect(again.statusCode).toBe(200);
    expect(again.headers['idempotent-replayed']).toBe('true');
    // The sandbox goes on from the snapshot: a deposit moves the position again.
    expect((await deposit(alice.apiKey, 10)).statusCode).toBe(200);
  });

  it('refuses a snapshot of another schema version, changing nothing', async () => {
    await client.query("UPDATE snapshots SET schema_version = 1 WHERE name = 'base'");
    try {
      const before = await allRows();
      const refused = await restore('base');
      expect(refused.statusCode).toBe(409);
      expect(refused.json().error).toMatch(
        /snapshot base cannot be restored: it was taken at schema version 1.*nothing was changed/,
      );
      expect(await allRows()).toEqual(before);
    } finally {
      await client.query(
        "UPDATE snapshots SET schema_version = (SELECT version FROM schema_version) WHERE name = 'base'",
      );
    }
  });

  it('leaves the state as it was when the restore’s connection is cut half way', async () => {
    expect((await deposit(alice.apiKey, 7)).statusCode).toBe(200);
    await onboarded();
    const before = { rows: await allRows(), reads: await reads(alice.apiKey) };
    const { rows } = await client.query("SELECT schema_name FROM snapshots WHERE name = 'base'");
    const schema = rows[0].schema_name as string;
    // The restore copies the index's tables last: holding one of its copies stops it there,
    // with the sandbox's tables already replaced in its transaction.
    const last = INDEX_TABLES.at(-1);
    await client.query('BEGIN');
    await client.query(`LOCK TABLE ${schema}."index__${last}" IN ACCESS EXCLUSIVE MODE`);
    // inject() sends once its answer is asked for: asked now, awaited below.
    const restoring = restore('base').then((answer) => answer);
    let pid = 0;
    // The restore's connection, once it waits for the test's lock.
    await until(async () => {
      const waiting = await client.query<{ pid: number }>(
        'SELECT pid FROM pg_stat_activity WHERE pg_backend_pid() = ANY (pg_blocking_pids(pid))',
      );
      pid = waiting.rows[0]?.pid ?? 0;
      return pid !== 0;
    });
    // Half way: the sandbox's rows are the snapshot's in the restore's transaction.
    const { rows: replaced } = await client.query(
      "SELECT count(*) AS n FROM pg_locks WHERE pid = $1 AND mode = 'AccessExclusiveLock' AND relation = 'public.agents'::regclass",
      [pid],
    );
    expect(Number(replaced[0].n)).toBe(1);
    const other = new pg.Client({ connectionString: database.url });
    await other.connect();
    try {
      await other.query('SELECT pg_terminate_backend($1)', [pid]);
    } finally {
      await other.end();
    }
    await client.query('ROLLBACK');
    const failed = await restoring;
    expect(failed.statusCode).toBe(503);
    expect(failed.json().error).toMatch(/restoring base failed: .*nothing was restored/);
    expect(await allRows()).toEqual(before.rows);
    expect(await reads(alice.apiKey)).toEqual(before.reads);
    // The sandbox goes on (its writer connects again), and restores next time.
    expect((await deposit(alice.apiKey, 3)).statusCode).toBe(200);
    expect((await restore('base')).statusCode).toBe(200);
    expect(await allRows()).toEqual(atSnapshot.rows);
    expect(await reads(alice.apiKey)).toEqual(atSnapshot.reads);
  });

  it('keeps nothing of a snapshot whose connection is cut half way', async () => {
    const before = await client.query('SELECT name, schema_name FROM snapshots ORDER BY name');
    const schemas = await snapshotSchemas();
    // The snapshot copies the sandbox's tables in the order of their names: holding the last
    // one stops it there, with the others already copied into its new schema.
    await client.query('BEGIN');
    await client.query('LOCK TABLE onboarding_queue IN ACCESS EXCLUSIVE MODE');
    const taking = admin(sandbox.app, 'POST', '/sandbox/snapshots', { name: 'cut' }).then(
      (answer) => answer,
    );
    let pid = 0;
    await until(async () => {
      // The connection waiting for the test's lock that took a new snapshot's number (its
      // schema, uncommitted, is not visible to others).
      const waiting = await client.query<{ pid: number }>(
        `SELECT DISTINCT pid FROM pg_locks
          WHERE relation = 'snapshot_schemas'::regclass AND granted
            AND pg_backend_pid() = ANY (pg_blocking_pids(pid))`,
      );
      pid = waiting.rows[0]?.pid ?? 0;
      return pid !== 0;
    });
    const other = new pg.Client({ connectionString: database.url });
    await other.connect();
    try {
      await other.query('SELECT pg_terminate_backend($1)', [pid]);
    } finally {
      await other.end();
    }
    await client.query('ROLLBACK');
    const failed = await taking;
    expect(failed.statusCode, failed.body).toBe(503);
    expect(failed.json().error).toMatch(/snapshot cut was not taken/);
    expect(
      (await client.query('SELECT name, schema_name FROM snapshots ORDER BY name')).rows,
    ).toEqual(before.rows);
    expect(await snapshotSchemas()).toEqual(schemas);
    // The next one is taken (the writer connects again).
    expect(
      (await admin(sandbox.app, 'POST', '/sandbox/snapshots', { name: 'cut' })).statusCode,
    ).toBe(200);
    const removed = await sandbox.app.inject({
      method: 'DELETE',
      url: '/sandbox/snapshots/cut',
      headers: { 'x-admin-token': ADMIN_TOKEN },
    });
    expect(removed.statusCode).toBe(200);
  });

  it('replaces a snapshot of the same name in one go, deletes one with its schema, and holds the bound', async () => {
    const first = await snapshotSchemas();
    const again = await admin(sandbox.app, 'POST', '/sandbox/snapshots', {
      name: 'base',
      replace: true,
    });
    expect(again.statusCode, again.body).toBe(200);
    const replacedBy = await snapshotSchemas();
    expect(replacedBy).toHaveLength(1);
    expect(replacedBy).not.toEqual(first);
    expect(
      (await admin(sandbox.app, 'POST', '/sandbox/snapshots', { name: 'doomed' })).statusCode,
    ).toBe(200);
    expect(await snapshotSchemas()).toHaveLength(2);
    const deleted = await sandbox.app.inject({
      method: 'DELETE',
      url: '/sandbox/snapshots/doomed',
      headers: { 'x-admin-token': ADMIN_TOKEN },
    });
    expect(deleted.statusCode).toBe(200);
    expect(await snapshotSchemas()).toEqual(replacedBy);
    expect((await restore('doomed')).statusCode).toBe(404);
    // Filled up to the bound with empty snapshots of its own making: one more is refused.
    await client.query('BEGIN');
    for (let i = 1; i < MAX_SNAPSHOTS; i++) {
      await client.query(`CREATE SCHEMA filler_${i}`);
      await client.query(
        `INSERT INTO snapshots (name, schema_name, sandbox_id, block_number, block_hash, created_at, schema_version, indexed)
         VALUES ($1, $2, 'x', 1, '0x', 0, 1, false)`,
        [`filler-${i}`, `filler_${i}`],
      );
    }
    await client.query('COMMIT');
    const refused = await admin(sandbox.app, 'POST', '/sandbox/snapshots', { name: 'one-more' });
    expect(refused.statusCode).toBe(409);
    expect(refused.json().error).toMatch(`at most ${MAX_SNAPSHOTS} snapshots`);
    const deleteFiller = await sandbox.app.inject({
      method: 'DELETE',
      url: '/sandbox/snapshots/filler-1',
      headers: { 'x-admin-token': ADMIN_TOKEN },
    });
    expect(deleteFiller.statusCode).toBe(200);
    expect(
      (await admin(sandbox.app, 'POST', '/sandbox/snapshots', { name: 'one-more' })).statusCode,
    ).toBe(200);
  });

  it('exports a snapshot as the state dir’s file format, which a sandbox on SQLite starts from', async () => {
    const exported = await admin(sandbox.app, 'GET', '/sandbox/snapshots/base/export');
    expect(exported.statusCode, exported.body).toBe(200);
    const dir = mkdtempSync(join(tmpdir(), 'agentctl-pg-export-'));
    try {
      const file = join(dir, 'base.sandbox');
      writeFileSync(file, exported.rawPayload, { mode: 0o600 });
      // Checked whole as serve --from checks it: its chain, its sandbox.db of this version's
      // schema, one sandbox and its mnemonic.
      const read = await readExport(file);
      expect(read.files['index.db']).toBeDefined();
      const state = join(dir, 'state');
      mkdirSync(state, { mode: 0o700 });
      await importExport(read, state);
      const store = openStore(join(state, 'sandbox.db'), { durable: false });
      try {
        await resumeRestore(state, store, join(state, 'index.db'));
        const agents = (
          await store.sql.all<{ agent_id: string }>('SELECT agent_id FROM agents')
        ).map((row) => row.agent_id);
        const live = await client.query<{ agent_id: string }>('SELECT agent_id FROM agents');
        expect(agents).toEqual(live.rows.map((row) => row.agent_id));
        expect(agents).toHaveLength(1);
      } finally {
        await store.close();
      }
      const index = new DatabaseSync(join(state, 'index.db'), { readOnly: true });
      try {
        const transactions = index.prepare('SELECT hash FROM transactions ORDER BY hash').all();
        const live = await client.query(
          `SELECT hash FROM ${INDEX_SCHEMA}.transactions ORDER BY hash`,
        );
        expect(transactions.map((row) => row.hash)).toEqual(live.rows.map((row) => row.hash));
      } finally {
        index.close();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('starts a sandbox in a new database from that export', async () => {
    const exported = await admin(sandbox.app, 'GET', '/sandbox/snapshots/base/export');
    expect(exported.statusCode, exported.body).toBe(200);
    const dir = mkdtempSync(join(tmpdir(), 'agentctl-pg-import-'));
    const second = await freshDatabase();
    let other: TestSandbox | undefined;
    try {
      const file = join(dir, 'base.sandbox');
      writeFileSync(file, exported.rawPayload, { mode: 0o600 });
      const read = await readExport(file);
      const store = await openPostgresStore(second.url);
      try {
        const mnemonic = databaseMnemonic(store.sql, { [SANDBOX_SECRET_ENV]: TEST_SANDBOX_SECRET });
        // An import that fails half way (the schema it would make is taken) leaves nothing,
        // its sealed mnemonic included; it is then done again, whole.
        await store.sql.run("SELECT setval('snapshot_schemas', 40)");
        await store.sql.run('CREATE SCHEMA snapshot_41');
        await expect(importIntoDatabase(read, store, mnemonic)).rejects.toThrow(/snapshot_41/);
        const left = await store.sql.get<{ n: number }>(
          'SELECT count(*)::int AS n FROM wallet_mnemonic',
        );
        expect(left?.n).toBe(0);
        await store.sql.run('DROP SCHEMA snapshot_41');
        await importIntoDatabase(read, store, mnemonic);
        // Once: a database that holds a sandbox is refused, unchanged.
        await expect(importIntoDatabase(read, store, mnemonic)).rejects.toThrow(
          /--from: the database holds a sandbox already/,
        );
      } finally {
        await store.close();
      }
      other = await createTestSandbox({ database: second.url, checkpointAfterMs: 3_600_000 });
      // Alice's key works there; her position, the vaults and the chain are the snapshot's.
      const there = (
        await call(other, alice.apiKey, 'GET', '/api/v1/agent/vault/positions')
      ).json();
      const here = (
        await call(sandbox, alice.apiKey, 'GET', '/api/v1/agent/vault/positions')
      ).json();
      expect(there).toEqual(here);
      expect(Number(await chainReader(other).getBlockNumber())).toBe(read.block_number);
      const listed = (await admin(other.app, 'GET', '/sandbox/snapshots')).json().snapshots;
      expect(listed.map((each: { name: string }) => each.name)).toEqual(['genesis', 'base']);
      expect((await admin(other.app, 'POST', '/sandbox/snapshots/base/restore')).statusCode).toBe(
        200,
      );
    } finally {
      await other?.close();
      await second.drop();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('restores genesis: no agents, an empty index indexed again, the chain from its start', async () => {
    const restored = await restore('genesis');
    expect(restored.statusCode, restored.body).toBe(200);
    const rows = await allRows();
    expect(rows.agents).toEqual([]);
    expect(rows.api_keys).toEqual([]);
    expect((await client.query('SELECT count(*) AS n FROM chain_checkpoints')).rows[0].n).toBe('0');
    const unknown = await call(sandbox, alice.apiKey, 'GET', '/api/v1/agent/vault/positions');
    // No agent at all: no key is known.
    expect(unknown.statusCode, unknown.body).toBe(503);
    expect(unknown.json().error).toMatch(/no API keys are configured/);
    // The index follows the chain from its start again: the vaults are there, no transactions.
    const vaults = (await sandbox.app.inject({ method: 'GET', url: '/v1/vaults' })).json();
    expect(vaults.vaults.length).toBeGreaterThan(0);
    expect(rows['index.transactions']).toEqual([]);
  });
});
