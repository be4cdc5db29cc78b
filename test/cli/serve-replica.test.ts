import { type Client, createClient } from 'graphql-ws';
import pg from 'pg';
import { formatUnits } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { NonceResponse, RegisterResponse } from '../../src/api/schemas/index.ts';
import { POSTGRES_SCHEMA_VERSION } from '../../src/sandbox/store/migrations-postgres.ts';
import { type FreshDatabase, freshDatabase } from '../helpers/postgres.ts';
import { type ServeProcess, serveFailure, startServe, until } from '../helpers/serve.ts';
import { startTcpCut } from '../helpers/tcp-cut.ts';

/**
 * `agentctl serve --replica --database URL` (issue 25 §1 "Read replicas"): the built binary,
 * one writer (a real anvil) and two replicas on one database of the run's throwaway
 * PostgreSQL, rate limits on. Every client of a test poses as its own address
 * (X-Forwarded-For, which the replicas and the writer trust: --trust-proxy), so that the tests'
 * requests count against their own limits.
 */
const TOKEN = 'replica-test-admin';
const SECRET = 'replica-test-secret-0123456789';
const PASSWORD = 'pw-never-shown-0815';

let database: FreshDatabase;
let url: string;
let writer: ServeProcess;
let replicaA: ServeProcess;
let replicaB: ServeProcess;
const started: ServeProcess[] = [];
const extraDatabases: FreshDatabase[] = [];

const ENV = { AGENTCTL_SANDBOX_SECRET: SECRET };
const COMMON = ['--admin-token', TOKEN, '--log-level', 'warn', '--trust-proxy'];

async function serve(args: string[], env: NodeJS.ProcessEnv = ENV): Promise<ServeProcess> {
  const process = await startServe([...COMMON, ...args], env);
  started.push(process);
  return process;
}
/** A replica: it opens no wallet, and needs no AGENTCTL_SANDBOX_SECRET. */
const startReplica = () =>
  serve(['--replica', '--database', url], { AGENTCTL_SANDBOX_SECRET: undefined });

beforeAll(async () => {
  database = await freshDatabase();
  const withPassword = new URL(database.url);
  withPassword.password = PASSWORD;
  url = withPassword.toString();
  writer = await serve(['--database', url]);
  [replicaA, replicaB] = await Promise.all([startReplica(), startReplica()]);
}, 60_000);

afterAll(async () => {
  for (const process of started) {
    process.child.kill('SIGTERM');
    await process.exited;
  }
  for (const db of [database, ...extraDatabases]) await db?.drop();
});

let nextClient = 0;
/** A new client address (X-Forwarded-For), with limits of its own. */
const newClient = () => `10.77.${Math.floor(++nextClient / 250)}.${nextClient % 250}`;

interface Sent {
  body?: object;
  apiKey?: string;
  admin?: boolean;
  ip: string;
}
async function send(base: string, method: string, path: string, sent: Sent) {
  const response = await fetch(`${base}${path}`, {
    method,
    headers: {
      'x-forwarded-for': sent.ip,
      ...(sent.body ? { 'content-type': 'application/json' } : {}),
      ...(sent.apiKey ? { 'x-api-key': sent.apiKey } : {}),
      ...(sent.admin ? { 'x-admin-token': TOKEN } : {}),
    },
    ...(sent.body ? { body: JSON.stringify(sent.body) } : {}),
  });
  // biome-ignore lint/suspicious/noExplicitAny: checked field by field
  const body = (await response.json()) as any;
  return { status: response.status, headers: response.headers, body };
}

/** Registers a new agent through `base` (its nonce and registration forwarded by a replica). */
async function register(base: string, ip = newClient()) {
  const account = privateKeyToAccount(generatePrivateKey());
  const nonceAnswer = await send(
    base,
    'GET',
    `/api/v1/agent/auth/nonce?wallet=${account.address}`,
    {
      ip,
    },
  );
  expect(nonceAnswer.status).toBe(200);
  const nonce = NonceResponse.parse(nonceAnswer.body);
  const answer = await send(base, 'POST', '/api/v1/agent/auth/register', {
    ip,
    body: {
      wallet_address: account.address,
      signature: await account.signMessage({ message: nonce.message }),
      nonce: nonce.nonce,
      agent_name: 'Replica Agent',
      operator_address: account.address,
    },
  });
  expect(answer.status, JSON.stringify(answer.body)).toBe(200);
  const apiKey = RegisterResponse.parse(answer.body).api_key;
  // Read at once, on the server that registered it (a replica reads it from the database): the
  // wallet is funded already, as the writer would say, not its balances from before funding.
  const wallet = await send(base, 'GET', '/api/v1/agent/wallet', { ip, apiKey });
  expect(wallet.status).toBe(200);
  expect(wallet.body).toMatchObject({ has_gas: true, usdc_balance: expect.any(Number) });
  expect(wallet.body.usdc_balance).toBeGreaterThan(0);
  return { apiKey, ip, address: wallet.body.agent_address as string };
}

type Agent = Awaited<ReturnType<typeof register>>;

async function deposit(base: string, agent: Agent, amount: number) {
  const answer = await send(base, 'POST', '/api/v1/agent/vault/deposit', {
    ip: agent.ip,
    apiKey: agent.apiKey,
    body: { vault_id: 'moderate', amount_usdc: amount },
  });
  expect(answer.status, JSON.stringify(answer.body)).toBe(200);
  return answer.body.deposit_tx as string;
}

async function graphql(base: string, ip: string, query: string) {
  const answer = await send(base, 'POST', '/graphql', { ip, body: { query } });
  expect(answer.status, JSON.stringify(answer.body)).toBe(200);
  return answer.body;
}

const userTransactions = async (base: string, ip: string, address: string) =>
  (
    await graphql(base, ip, `{ userTransactions(address: "${address}", limit: 100) { hash } }`)
  ).data.userTransactions.map((transaction: { hash: string }) => transaction.hash) as string[];

/** A graphql-transport-ws subscription to every transaction, on `base`, with its events. */
function transactions(base: string) {
  const heard: Array<{ hash: string; at: number }> = [];
  const client: Client = createClient({
    url: `${base.replace(/^http/, 'ws')}/graphql`,
    webSocketImpl: WebSocket,
    retryAttempts: 0,
    lazy: false,
    // A replica killed under it ends its socket: the test closes the client then.
    onNonLazyError: () => undefined,
  });
  let subscribed!: () => void;
  const ready = new Promise<void>((resolve) => {
    subscribed = resolve;
  });
  client.on('connected', () => subscribed());
  const stop = client.subscribe<{ transactionCreated: { hash: string } }>(
    { query: 'subscription { transactionCreated { hash } }' },
    {
      next: (value) => {
        const hash = value.data?.transactionCreated.hash;
        if (hash) heard.push({ hash, at: performance.now() });
      },
      error: () => undefined,
      complete: () => undefined,
    },
  );
  return {
    heard,
    ready,
    hashes: () => heard.map((event) => event.hash),
    async close() {
      stop();
      await client.dispose();
    },
  };
}

/** The number of subscriptions `base` serves now (/sandbox/info). */
async function subscriptionsOn(base: string): Promise<number> {
  const info = await send(base, 'GET', '/sandbox/info', { ip: '10.1.1.1', admin: true });
  return info.body.graphql.subscriptions as number;
}

/** The one subscriber of `base` (the tests' only one there), once the server serves it. */
async function subscriberOn(base: string) {
  await until(async () => (await subscriptionsOn(base)) === 0);
  const subscriber = transactions(base);
  await subscriber.ready;
  await until(async () => (await subscriptionsOn(base)) === 1);
  return subscriber;
}

describe('serve --replica --database', () => {
  it('refuses what a replica has no use for, and a database that holds no sandbox', async () => {
    const failures = await Promise.all([
      serveFailure(['--replica']),
      serveFailure(['--replica', '--database', url, '--state', '/tmp/x']),
      serveFailure(['--replica', '--database', url, '--rpc-url', 'http://127.0.0.1:9']),
      serveFailure(['--replica', '--database', url, '--advertise-url', 'http://10.0.0.5:8787']),
      serveFailure(['--replica', '--database', url, '--from', 'x.sandbox']),
      serveFailure(['--replica', '--state', '/tmp/x'], { AGENTCTL_DATABASE_URL: url }),
    ]);
    for (const failure of failures) expect(failure.code, failure.stderr).toBe(2);
    expect(failures[0]?.stderr).toContain('--replica needs --database');
    expect(failures[1]?.stderr).toContain('--replica --database cannot be used with --state');
    expect(failures[3]?.stderr).toContain('cannot be used with --advertise-url');
    expect(failures[5]?.stderr).toContain(
      '--replica AGENTCTL_DATABASE_URL cannot be used with --state',
    );
    for (const failure of failures) expect(failure.stderr).not.toContain(PASSWORD);
    const empty = await freshDatabase();
    extraDatabases.push(empty);
    const none = await serveFailure(['--port', '0', '--replica', '--database', empty.url], ENV);
    expect(none.code).toBe(1);
    expect(none.stderr).toContain('start the writer first');
    // A schema another agentctl made: a replica changes nothing, it refuses.
    const client = new pg.Client({ connectionString: empty.url });
    await client.connect();
    try {
      await client.query(
        'CREATE TABLE schema_version (one BOOLEAN PRIMARY KEY DEFAULT true, version INTEGER NOT NULL)',
      );
      for (const [version, words] of [
        [POSTGRES_SCHEMA_VERSION + 1, 'newer than this agentctl knows'],
        [POSTGRES_SCHEMA_VERSION - 1, 'older than this agentctl'],
      ] as const) {
        await client.query(
          'INSERT INTO schema_version (version) VALUES ($1) ON CONFLICT (one) DO UPDATE SET version = excluded.version',
          [version],
        );
        const refused = await serveFailure(
          ['--port', '0', '--replica', '--database', empty.url],
          ENV,
        );
        expect(refused.code).toBe(1);
        expect(refused.stderr).toContain(words);
        const { rows } = await client.query('SELECT version FROM schema_version');
        expect(rows).toEqual([{ version }]);
      }
    } finally {
      await client.end();
    }
  });

  it('says in its ready block and /sandbox/info that it is a replica, and which writer it forwards to', async () => {
    for (const replica of [replicaA, replicaB]) {
      expect(replica.stdout()).toContain(`writer: ${writer.url} (writes are forwarded there)`);
      expect(replica.stdout()).toMatch(/^state: postgres:\/\/agentctl:\*\*\*@/m);
      expect(replica.stdout() + replica.stderr()).not.toContain(PASSWORD);
      const info = await send(replica.url, 'GET', '/sandbox/info', {
        ip: newClient(),
        admin: true,
      });
      expect(info.status).toBe(200);
      expect(info.body).toMatchObject({
        role: 'replica',
        database: 'postgres',
        rpc_url: '',
        standby: { status: 'none', block_number: null },
        persistent: true,
      });
      expect(info.body.state_dir).toMatch(/^postgres:\/\/agentctl:\*\*\*@/);
      const health = await send(replica.url, 'GET', '/health', { ip: newClient() });
      expect(health.body).toMatchObject({ status: 'ok', database: { reachable: true } });
    }
  });

  it('answers every read as the writer does, after writes sent through both replicas', async () => {
    const [one, two] = await Promise.all([register(replicaA.url), register(replicaB.url)]);
    await deposit(replicaA.url, one, 3);
    await deposit(replicaB.url, two, 4);
    const last = await deposit(replicaB.url, one, 2);
    // Sandbox time moved through a replica (an admin write, forwarded) is every server's.
    const advanced = await send(replicaA.url, 'POST', '/sandbox/clock/advance', {
      ip: newClient(),
      admin: true,
      body: { seconds: 7200 },
    });
    expect(advanced.status).toBe(200);
    const servers = [writer.url, replicaA.url, replicaB.url];
    // Replicas hear of the writer's commits a moment later.
    for (const base of servers) {
      const ip = newClient();
      await until(async () => (await userTransactions(base, ip, one.address)).includes(last));
      await until(async () => {
        const info = await send(base, 'GET', '/sandbox/info', { ip, admin: true });
        return info.body.clock.offset_seconds === advanced.body.offset_seconds;
      });
    }
    const moderate = (await send(writer.url, 'GET', '/api/v1/vaults', { ip: newClient() })).body
      .vaults[0].address as string;
    const reads = [
      '/api/v1/vaults',
      '/api/v1/agents',
      '/api/v1/agents/stats',
      '/api/v1/proposals',
      '/v1/vaults',
      `/v1/vaults/${moderate}`,
      '/v1/strategies',
      '/v1/protocol/stats',
      `/v1/users/${one.address}/transactions`,
      `/v1/users/${two.address}/positions`,
    ];
    const seenBy = async (base: string) => {
      const ip = newClient();
      const seen: Record<string, unknown> = {};
      for (const path of reads) {
        const answer = await send(base, 'GET', path, { ip });
        expect(answer.status, `${base}${path}: ${JSON.stringify(answer.body)}`).toBe(200);
        seen[path] = answer.body;
      }
      for (const agent of [one, two]) {
        const positions = await send(base, 'GET', '/api/v1/agent/vault/positions', {
          ip,
          apiKey: agent.apiKey,
        });
        expect(positions.status).toBe(200);
        seen[`positions ${agent.address}`] = positions.body;
        seen[`POST positions ${agent.address}`] = (
          await send(base, 'POST', '/api/v1/positions', {
            ip,
            body: { wallet_address: agent.address },
          })
        ).body;
      }
      seen.graphql = await graphql(
        base,
        ip,
        `{ vaults { address tvl totalShares }
           userPositions(address: "${one.address}") { shares }
           userTransactions(address: "${two.address}") { hash type amount timestamp }
           protocolStats { totalTvl users } }`,
      );
      return seen;
    };
    const onWriter = await seenBy(writer.url);
    expect((onWriter[`/v1/users/${one.address}/transactions`] as { total: number }).total).toBe(2);
    expect(await seenBy(replicaA.url)).toEqual(onWriter);
    expect(await seenBy(replicaB.url)).toEqual(onWriter);
  });

  it('answers an authenticated read on one replica with every write acknowledged through the other before it', async () => {
    const agent = await register(replicaA.url);
    // Each deposit, acknowledged through A (by the writer, once indexed), is read on B at once:
    // B waits for the index's commits the feed held when the read came, never answers before.
    // (8: the writes tier allows 10 a minute.)
    for (let made = 1; made <= 8; made++) {
      const answer = await send(replicaA.url, 'POST', '/api/v1/agent/vault/deposit', {
        ip: agent.ip,
        apiKey: agent.apiKey,
        body: { vault_id: 'moderate', amount_usdc: 1 },
      });
      expect(answer.status).toBe(200);
      const read = await send(replicaB.url, 'GET', '/api/v1/agent/vault/positions', {
        ip: agent.ip,
        apiKey: agent.apiKey,
      });
      expect(read.status).toBe(200);
      expect(read.body.positions).toMatchObject([
        { vault_id: 'moderate', shares: formatUnits(BigInt(answer.body.shares_balance), 6) },
      ]);
    }
  });

  it('tells a subscriber on one replica of a deposit made through the other within 250 ms (p99 of 54)', async () => {
    const agents = await Promise.all(Array.from({ length: 6 }, () => register(replicaA.url)));
    const subscriber = await subscriberOn(replicaB.url);
    const delays: number[] = [];
    try {
      // 9 deposits each: under the writes limit of 10 a minute an agent.
      for (let round = 0; round < 9; round++) {
        for (const agent of agents) {
          const hash = await deposit(replicaA.url, agent, 1);
          const answeredAt = performance.now();
          await until(() => subscriber.hashes().includes(hash), 10_000);
          const heard = subscriber.heard.find((event) => event.hash === hash);
          delays.push(Math.max(0, (heard?.at ?? answeredAt) - answeredAt));
        }
      }
    } finally {
      await subscriber.close();
    }
    const sorted = [...delays].sort((a, b) => a - b);
    const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)];
    const p50 = at(0.5) as number;
    const p99 = at(0.99) as number;
    console.log(
      `replica B heard ${delays.length} deposits made through replica A: p50 ${p50.toFixed(1)} ms, p99 ${p99.toFixed(1)} ms, max ${(sorted.at(-1) as number).toFixed(1)} ms`,
    );
    expect(delays).toHaveLength(54);
    expect(p99).toBeLessThanOrEqual(250);
  });

  it('counts the data API’s public minute limit once across both replicas', async () => {
    const ip = newClient();
    const statuses: number[] = [];
    for (let i = 0; i < 40; i++) {
      for (const base of [replicaA.url, replicaB.url]) {
        statuses.push((await send(base, 'GET', '/v1/protocol/stats', { ip })).status);
      }
    }
    // The public tier: 60 a minute, whichever replica answers.
    expect(statuses.filter((status) => status === 200)).toHaveLength(60);
    expect(statuses.filter((status) => status === 429)).toHaveLength(20);
    // The first 60 pass, the rest are refused: one count, not one per replica.
    expect(statuses.slice(0, 60).every((status) => status === 200)).toBe(true);
  });

  it('answers 503 while its database is cut off, says why on /health, and answers again once it is back', async () => {
    const target = new URL(url);
    const cut = await startTcpCut({ host: target.hostname, port: Number(target.port) });
    try {
      target.port = String(cut.port);
      const replica = await serve(['--replica', '--database', target.toString()]);
      const ip = newClient();
      const user = '0x00000000000000000000000000000000000000aa';
      expect((await send(replica.url, 'GET', '/v1/vaults', { ip })).status).toBe(200);
      cut.cut();
      const health = await send(replica.url, 'GET', '/health', { ip });
      expect(health.body).toMatchObject({ status: 'degraded', database: { reachable: false } });
      expect(health.body.reason).toMatch(/database cannot be reached/);
      expect((await send(replica.url, 'GET', '/api/v1/agents', { ip })).status).toBe(503);
      for (const path of [`/v1/users/${user}/transactions`, '/v1/vaults']) {
        expect((await send(replica.url, 'GET', path, { ip })).status).toBe(503);
      }
      cut.restore();
      await until(
        async () => (await send(replica.url, 'GET', '/health', { ip })).body.status === 'ok',
      );
      expect((await send(replica.url, 'GET', '/v1/vaults', { ip })).status).toBe(200);
      expect((await send(replica.url, 'GET', '/api/v1/agents', { ip })).status).toBe(200);
      expect(replica.child.exitCode).toBeNull();
    } finally {
      await cut.close();
    }
  });

  it('a replica killed (kill -9) and restarted misses no deposit for a subscriber that resubscribes and reads what it missed', async () => {
    const agent = await register(replicaA.url);
    const made: string[] = [];
    const first = await subscriberOn(replicaB.url);
    for (let i = 0; i < 3; i++) made.push(await deposit(replicaA.url, agent, 1));
    await until(() => made.every((hash) => first.hashes().includes(hash)));
    const heardBefore = first.hashes().filter((hash) => made.includes(hash));
    // kill -9: no goodbye to the subscriber, whose socket just ends.
    replicaB.child.kill('SIGKILL');
    await replicaB.exited;
    await first.close();
    for (let i = 0; i < 3; i++) made.push(await deposit(replicaA.url, agent, 1));
    replicaB = await startReplica();
    // The subscriber comes back: it subscribes again, then reads its history for what it missed.
    const second = await subscriberOn(replicaB.url);
    const history = await userTransactions(replicaB.url, agent.ip, agent.address);
    for (let i = 0; i < 3; i++) made.push(await deposit(replicaA.url, agent, 1));
    await until(() => made.slice(6).every((hash) => second.hashes().includes(hash)));
    await second.close();
    // Nothing skipped: each deposit was heard, or is in the history read after resubscribing.
    const missed = made.filter(
      (hash) => !heardBefore.includes(hash) && !second.hashes().includes(hash),
    );
    expect(missed).toEqual(made.slice(3, 6));
    for (const hash of missed) expect(history).toContain(hash);
    // And the history read on the new replica is every deposit made before it, newest first.
    expect(history.slice(0, 6)).toEqual(made.slice(0, 6).reverse());
  });
  it('serves reads while no writer runs, answers writes 503 then, and forwards them to the writer that starts next', async () => {
    const agent = await register(replicaA.url);
    await deposit(replicaA.url, agent, 1);
    const wallet = await send(writer.url, 'GET', '/api/v1/agent/wallet', {
      ip: agent.ip,
      apiKey: agent.apiKey,
    });
    expect(wallet.status).toBe(200);
    // A writer stopped cleanly takes its URL out of the database.
    writer.child.kill('SIGTERM');
    expect(await writer.exited).toBe(0);
    // This one is given its database by AGENTCTL_DATABASE_URL.
    const lone = await serve(['--replica'], {
      AGENTCTL_DATABASE_URL: url,
      AGENTCTL_SANDBOX_SECRET: undefined,
    });
    expect(lone.stdout()).toContain('writer: none serves now (writes answer 503 until one does)');
    for (const base of [replicaA.url, lone.url]) {
      const positions = await send(base, 'GET', '/api/v1/agent/vault/positions', {
        ip: agent.ip,
        apiKey: agent.apiKey,
      });
      expect(positions.status).toBe(200);
      expect(positions.body.positions).toHaveLength(1);
      // The wallet's balances are read from the database too (the index), as the writer had.
      const walletRead = await send(base, 'GET', '/api/v1/agent/wallet', {
        ip: agent.ip,
        apiKey: agent.apiKey,
      });
      expect(walletRead.status).toBe(200);
      expect(walletRead.body).toEqual(wallet.body);
      const refused = await send(base, 'POST', '/api/v1/agent/vault/deposit', {
        ip: agent.ip,
        apiKey: agent.apiKey,
        body: { vault_id: 'moderate', amount_usdc: 1 },
      });
      expect(refused.status).toBe(503);
      expect(refused.headers.get('retry-after')).toBe('2');
    }
    // The next writer (on another port): the replicas read its URL from the database.
    writer = await serve(['--database', url]);
    const hash = await deposit(lone.url, agent, 1);
    await until(async () =>
      (await userTransactions(replicaA.url, agent.ip, agent.address)).includes(hash),
    );
  });
});
