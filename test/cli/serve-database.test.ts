import { execFile } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import type { Address } from 'viem';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { redactedUrl } from '../../src/sandbox/store/postgres.ts';
import { WRITER_LOCK_KEY } from '../../src/sandbox/team/writer-lock.ts';
import { runCli } from '../helpers/cli.ts';
import { type Answer, keyedWrites } from '../helpers/keyed-writes.ts';
import { type FreshDatabase, freshDatabase, postgresBinDir } from '../helpers/postgres.ts';
import { depositOver, registerOver, serveFailure, useServes } from '../helpers/serve.ts';
import { startTcpCut } from '../helpers/tcp-cut.ts';

/**
 * `agentctl serve --database URL` (issue 25 §1): the built binary, a real anvil and the run's
 * throwaway PostgreSQL. The whole sandbox is in the database: a writer started after another
 * stopped (a new process, a new work dir) serves the same agents, balances and index.
 */
const run = promisify(execFile);
const TOKEN = 'database-test-admin';
const SECRET = 'database-test-secret-0123456789';
/** In the URL, never to be shown: the cluster trusts loopback, so it is not even checked. */
const PASSWORD = 'pw-never-shown-4711';
const serves = useServes('serve-database', TOKEN);

const databases: FreshDatabase[] = [];
/** The URL of a new database, with a password (see PASSWORD). */
async function newDatabase(): Promise<string> {
  const db = await freshDatabase();
  databases.push(db);
  const withPassword = new URL(db.url);
  withPassword.password = PASSWORD;
  return withPassword.toString();
}
let url: string;
beforeAll(async () => {
  url = await newDatabase();
});
afterAll(async () => {
  for (const db of databases) await db.drop();
});

const writer = (env: NodeJS.ProcessEnv = {}, on = url, args: string[] = []) =>
  serves.serve(['--database', on, '--rate-limit', 'off', ...args], {
    AGENTCTL_SANDBOX_SECRET: SECRET,
    ...env,
  });
const { keyedDeposit, fundedAgent, rpcUrlOf, sentBy, burstOf, sendBurst, expectOnceEach } =
  keyedWrites(TOKEN);

async function getJson(address: string) {
  const response = await fetch(address);
  expect(response.status).toBe(200);
  // biome-ignore lint/suspicious/noExplicitAny: checked field by field
  return (await response.json()) as any;
}

async function graphql(base: string, query: string) {
  const response = await fetch(`${base}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ query }),
  });
  expect(response.status).toBe(200);
  // biome-ignore lint/suspicious/noExplicitAny: checked field by field
  return ((await response.json()) as any).data;
}

/** What a reader sees of one agent: its wallet, balances, position and history, by every API. */
async function seenOf(base: string, apiKey: string) {
  const wallet = await serves.request(base, 'GET', '/api/v1/agent/wallet', undefined, apiKey);
  expect(wallet.status).toBe(200);
  const address = wallet.body.agent_address as string;
  const transactions = await getJson(`${base}/v1/users/${address}/transactions`);
  const positions = await getJson(`${base}/v1/users/${address}/positions`);
  const viaGraphql = await graphql(
    base,
    `{ userPositions(address: "${address}") { shares }
       userTransactions(address: "${address}") { hash type amount timestamp } }`,
  );
  return { wallet: wallet.body, transactions, positions, viaGraphql };
}

describe('serve --database', () => {
  it('keeps the whole sandbox in the database: a writer started after another stopped serves the same agents, balances and index', async () => {
    const first = await writer({ PGPASSWORD: 'pg-env-secret-0815' });
    const info = (await serves.request(first.url, 'GET', '/sandbox/info')).body;
    expect(info).toMatchObject({ persistent: true, role: 'writer', database: 'postgres' });
    // Where the state is: the database, named without its password (not the work dir).
    expect(info.state_dir).toBe(redactedUrl(url));
    expect(info.state_dir).not.toContain(PASSWORD);
    const { apiKey } = await registerOver(first.url);
    await depositOver(first.url, apiKey, 25);
    // The ready block names the database without its password; nothing else shows it.
    expect(first.stdout()).toMatch(/^state: postgres:\/\/agentctl:\*\*\*@/m);
    expect(first.stdout()).toMatch(
      /^work dir: \S+ \(this writer's anvil files, removed at exit\)/m,
    );
    const workDir = /^work dir: (\S+)/m.exec(first.stdout())?.[1] as string;
    // anvil gets none of agentctl's secrets in its environment (readable in /proc/PID/environ).
    const anvilPid = readFileSync(join(workDir, 'anvil.pid'), 'utf8').split(' ')[0];
    const anvilEnv = readFileSync(`/proc/${anvilPid}/environ`, 'utf8');
    for (const secret of [SECRET, 'pg-env-secret-0815']) expect(anvilEnv).not.toContain(secret);
    // One writer: a second is refused while the first runs, naming it, and changes nothing.
    const refused = await serveFailure(['--port', '0', '--database', url], {
      AGENTCTL_SANDBOX_SECRET: SECRET,
    });
    expect(refused.code).toBe(3);
    // It names the first by the URL that first records for replicas: by default its own.
    expect(refused.stderr).toContain(
      `is served by a writer at ${first.url} (host ${hostname()}, pid ${first.child.pid})`,
    );
    expect(refused.stderr).toContain('one writer at a time');
    expect(refused.stderr).not.toContain(PASSWORD);
    // The first goes on writing, as the writer replicas are told of.
    await depositOver(first.url, apiKey, 5);
    const before = await seenOf(first.url, apiKey);
    expect(before.transactions.total).toBe(2);
    expect(before.viaGraphql.userTransactions).toHaveLength(2);
    // Snapshots are kept in the database too (a schema each), through the same CLI.
    const cli = await runCli(['sandbox', 'snapshot', 'x', '--json'], {
      AGENTCTL_BASE_URL: first.url,
      AGENTCTL_ADMIN_TOKEN: TOKEN,
      AGENTCTL_CONFIG_DIR: serves.dir(),
    });
    expect(cli.stderr).toBe('');
    expect(cli.code).toBe(0);
    expect(JSON.parse(cli.stdout)).toMatchObject({ name: 'x' });
    const listed = await serves.request(first.url, 'GET', '/sandbox/snapshots');
    expect(listed.body.snapshots.map((each: { name: string }) => each.name)).toEqual([
      'genesis',
      'x',
    ]);
    await serves.stop(first);
    expect(`${first.stdout()}${first.stderr()}`).not.toContain(PASSWORD);
    expect(existsSync(workDir)).toBe(false);

    const second = await writer();
    expect(/^work dir: (\S+)/m.exec(second.stdout())?.[1]).not.toBe(workDir);
    expect(await seenOf(second.url, apiKey)).toEqual(before);
    // And it goes on from there: the same agent's next write is its third.
    await depositOver(second.url, apiKey, 1);
    expect((await seenOf(second.url, apiKey)).transactions.total).toBe(3);
    await serves.stop(second);
    expect(`${second.stdout()}${second.stderr()}`).not.toContain(PASSWORD);
  });
});

describe('a backup with pg_dump', () => {
  it('restored into another database with pg_restore, starts the same sandbox there (the restore test docs/team-sandbox.md describes)', async () => {
    // A sandbox of its own: the other tests' snapshots are not this one's.
    const on = await newDatabase();
    const first = await writer({}, on);
    const { apiKey } = await registerOver(first.url);
    await depositOver(first.url, apiKey, 7);
    await serves.request(first.url, 'POST', '/sandbox/snapshots', { name: 'before-backup' });
    // Taken while the writer runs: pg_dump reads one snapshot of the whole database.
    const dump = join(serves.dir(), 'sandbox.dump');
    await run(join(postgresBinDir(), 'pg_dump'), ['--format=custom', `--file=${dump}`, on]);
    const before = await seenOf(first.url, apiKey);
    await depositOver(first.url, apiKey, 1);
    await serves.stop(first);

    const restored = await newDatabase();
    await run(join(postgresBinDir(), 'pg_restore'), ['--no-owner', `--dbname=${restored}`, dump]);
    const second = await writer({}, restored);
    // The sandbox as it was at the dump (the deposit after it is not in it), its snapshots too.
    expect(await seenOf(second.url, apiKey)).toEqual(before);
    const listed = await serves.request(second.url, 'GET', '/sandbox/snapshots');
    expect(listed.body.snapshots.map((each: { name: string }) => each.name)).toEqual([
      'genesis',
      'before-backup',
    ]);
    // And it goes on from there.
    await depositOver(second.url, apiKey, 2);
    const after = await seenOf(second.url, apiKey);
    expect(after.transactions.total).toBe(before.transactions.total + 1);
  });
});

describe('serve --from FILE --database URL', () => {
  it('starts a new database as the exported sandbox, from either backend, and refuses a database that holds one', async () => {
    // The export comes from a sandbox in a state dir: a team's sandbox can start as anyone's.
    const state = join(serves.dir(), 'state');
    const local = await serves.serve(['--state', state, '--rate-limit', 'off']);
    const { apiKey } = await registerOver(local.url);
    await depositOver(local.url, apiKey, 9);
    expect(
      (await serves.request(local.url, 'POST', '/sandbox/snapshots', { name: 'seeded' })).status,
    ).toBe(200);
    const exported = await fetch(`${local.url}/sandbox/snapshots/seeded/export`, {
      headers: { 'x-admin-token': TOKEN },
    });
    expect(exported.status).toBe(200);
    const file = join(serves.dir(), 'seeded.sandbox');
    writeFileSync(file, Buffer.from(await exported.arrayBuffer()), { mode: 0o600 });
    const before = await seenOf(local.url, apiKey);
    await serves.stop(local);

    const on = await newDatabase();
    const team = await writer({}, on, ['--from', file]);
    expect(await seenOf(team.url, apiKey)).toEqual(before);
    const listed = await serves.request(team.url, 'GET', '/sandbox/snapshots');
    expect(listed.body.snapshots.map((each: { name: string }) => each.name)).toEqual([
      'genesis',
      'seeded',
    ]);
    await depositOver(team.url, apiKey, 1);
    await serves.stop(team);

    // Again on the same database: refused, changing nothing; started without --from, it goes on.
    const again = await serveFailure(['--database', on, '--from', file, '--port', '0'], {
      AGENTCTL_SANDBOX_SECRET: SECRET,
    });
    expect(again.code).toBe(1);
    expect(again.stderr).toContain('the database holds a sandbox already');
    expect(again.stderr).not.toContain(PASSWORD);
    const resumed = await writer({}, on);
    expect((await seenOf(resumed.url, apiKey)).transactions.total).toBe(
      before.transactions.total + 1,
    );
    // A replica takes no export: the writer does.
    const replica = await serveFailure(['--replica', '--database', on, '--from', file]);
    expect(replica.code).toBe(2);
    expect(replica.stderr).toContain('--replica --database cannot be used with --from');
  });
});

describe('a writer killed with kill -9 under write load', () => {
  it('leaves the database to a new writer that loses nothing acknowledged, forks no wallet, and replays every retried key', async () => {
    // The writer kills itself (kill -9) at a commit of the burst's, as serve-idempotency's
    // burst does: some writes answered, some committed and never answered, the rest not mined.
    const agents = 4;
    const own = await newDatabase();
    const first = await writer({ AGENTCTL_SANDBOX_FAULT: `crash-after-commit:${agents + 5}` }, own);
    const writes = await burstOf(first.url, agents, 6);
    const before = await sendBurst(first.url, writes);
    expect(await first.exited).toBe('SIGKILL');
    serves.forget(first);
    expect(before.size).toBeLessThan(writes.length);
    expect(before.size).toBeGreaterThan(0);

    // Another writer, in a work dir of its own, recovers the chain from the database alone.
    const second = await writer({}, own);
    const after = new Map<string, Answer>();
    await Promise.all(
      writes.map(async (write) => {
        after.set(write.key, await keyedDeposit(second.url, write.apiKey, write.key, write.amount));
      }),
    );
    for (const [key, answer] of before) {
      expect(answer.status).toBe(200);
      expect(after.get(key)).toEqual({ ...answer, replayed: 'true' });
    }
    const unanswered = writes.filter((write) => !before.has(write.key));
    expect(unanswered.some((write) => after.get(write.key)?.replayed === 'true')).toBe(true);
    const rpcUrl = await rpcUrlOf(second.url);
    await expectOnceEach(rpcUrl, writes, after);

    // Nothing forked: a new agent gets a wallet no earlier agent has, with no history on the
    // chain, and an earlier agent's wallet goes on from its nonce.
    const earlier = new Set(writes.map((write) => write.address.toLowerCase()));
    const newcomer = await fundedAgent(second.url);
    expect(earlier.has(newcomer.address.toLowerCase())).toBe(false);
    expect(await sentBy(rpcUrl, newcomer.address)).toBe(0);
    const [one] = writes as [(typeof writes)[number]];
    const sent = await sentBy(rpcUrl, one.address as Address);
    await depositOver(second.url, one.apiKey, 1);
    expect(await sentBy(rpcUrl, one.address as Address)).toBe(sent + 2);
  });
});

describe('a writer that lost the lock', () => {
  it('stops once it finds another holding it (its session ended meanwhile), with exit 1', async () => {
    const own = await newDatabase();
    // The writer reaches PostgreSQL through a relay the test cuts: its sessions end, and it
    // cannot connect again until the relay is restored, by when another holds the lock.
    const direct = new URL(own);
    const relay = await startTcpCut({ host: direct.hostname, port: Number(direct.port) });
    const relayed = new URL(own);
    relayed.port = String(relay.port);
    const client = new pg.Client({ connectionString: own });
    try {
      const first = await writer({}, relayed.toString(), [
        '--advertise-url',
        'http://a.internal:8787/',
      ]);
      await registerOver(first.url);
      await client.connect();
      relay.cut();
      // While it cannot reach the database, /health says so (a load balancer's check).
      const health = await fetch(`${first.url}/health`);
      expect(health.status).toBe(200);
      expect(await health.json()).toMatchObject({
        status: 'degraded',
        database: { reachable: false },
      });
      // Waits until the server has ended the writer's session, which frees its lock.
      await client.query('SELECT pg_advisory_lock($1)', [WRITER_LOCK_KEY]);
      relay.restore();
      // Its next write connection (its heartbeat's, within WRITER_HEARTBEAT_MS) finds the lock
      // held by another: it stops, and says why.
      expect(await first.exited).toBe(1);
      serves.forget(first);
      expect(first.stderr()).toContain('another writer took over');
      // The row still names this writer (the test holds the lock, and wrote none): it does not
      // name itself as the one that took over.
      expect(first.stderr()).toContain(
        'is served by another writer (it has not said where it serves yet)',
      );
      expect(first.stderr()).not.toContain('is served by a writer at http://a.internal:8787');
      expect(first.stderr()).toContain('writer lock lost');
    } finally {
      await client.end();
      await relay.close();
    }
  });
});

describe('acknowledged writes lost from the database', () => {
  it('are noticed: the index witnesses blocks the chain log no longer has, and the writer refuses to start, saying what to do', async () => {
    const own = await newDatabase();
    // No automatic checkpoint: the chain is rebuilt from the log, which the test then cuts.
    const first = await writer({ AGENTCTL_CHECKPOINTS: 'manual' }, own);
    const { apiKey } = await registerOver(first.url);
    for (let i = 0; i < 3; i++) await depositOver(first.url, apiKey, 1);
    await serves.stop(first, 'SIGKILL');
    const client = new pg.Client({ connectionString: own });
    await client.connect();
    let top: number;
    try {
      const { rows } = await client.query<{ top: string }>(
        'SELECT max(number) AS top FROM chain_blocks',
      );
      top = Number(rows[0]?.top);
      // As a restore of an older backup of the store's tables would: the deposits' blocks go.
      await client.query('DELETE FROM chain_blocks WHERE number > $1', [top - 3]);
    } finally {
      await client.end();
    }

    const env = { AGENTCTL_SANDBOX_SECRET: SECRET, AGENTCTL_CHECKPOINTS: 'manual' };
    const refused = await serveFailure(['--port', '0', '--database', own], env);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain(
      `the database holds the chain up to block ${top - 3}, but the index (schema sandbox_index) has indexed blocks up to ${top}, with 3 vault transaction(s) past it`,
    );
    expect(refused.stderr).toContain('DROP SCHEMA sandbox_index CASCADE');
    expect(refused.stderr).not.toContain(PASSWORD);
  });
});

describe('serve --database refuses', () => {
  it('a URL that is not PostgreSQL, and the options of a state dir, with exit 2 and without the password', async () => {
    const env = { AGENTCTL_SANDBOX_SECRET: SECRET };
    const mysql = await serveFailure(['--database', `mysql://me:${PASSWORD}@db/x`], env);
    expect(mysql.code).toBe(2);
    expect(mysql.stderr).toContain('--database mysql://me:***@db/x is a mysql:// URL');
    expect(mysql.stderr).not.toContain(PASSWORD);
    const withState = await serveFailure(['--database', url, '--state', '/tmp/x'], env);
    expect(withState.code).toBe(2);
    expect(withState.stderr).toContain('--database cannot be used with --state');
    expect(withState.stderr).not.toContain(PASSWORD);
    const fromEnv = await serveFailure(['--state', '/tmp/x'], {
      ...env,
      AGENTCTL_DATABASE_URL: url,
    });
    expect(fromEnv.code).toBe(2);
    expect(fromEnv.stderr).toContain('AGENTCTL_DATABASE_URL cannot be used with --state');
    const advertise = await serveFailure(['--advertise-url', 'http://10.0.0.5:8787'], env);
    expect(advertise.code).toBe(2);
    expect(advertise.stderr).toContain('--advertise-url');
    for (const [given, why] of [
      [`http://me:${PASSWORD}@writer:8787`, 'must not hold a user or a password'],
      ['writer:8787', 'must be an http(s) URL'],
      [`ftp://me:${PASSWORD}@writer/`, 'must be an http(s) URL'],
    ]) {
      const bad = await serveFailure(['--database', url, '--advertise-url', given as string], env);
      expect(bad.code).toBe(2);
      expect(bad.stderr).toContain(why);
      expect(bad.stderr).not.toContain(PASSWORD);
    }
    // stop, status and logs look after a state dir: a database's serve is not looked for there.
    for (const verb of ['status', 'stop', 'logs']) {
      const refused = await runCli(['serve', verb, '--database', url]);
      expect(refused.code).toBe(2);
      expect(refused.stderr).toContain(`serve ${verb} covers a sandbox in a state dir`);
      expect(refused.stderr).not.toContain(PASSWORD);
    }
  });
});
