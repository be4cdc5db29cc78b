import { connect, createServer, type Server, type Socket } from 'node:net';
import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../src/sandbox/app.ts';
import { hashAdminToken } from '../../src/sandbox/plugins/auth.ts';
import { createDatabaseCounter } from '../../src/sandbox/plugins/rate-counter.ts';
import type { App } from '../../src/sandbox/routes/types.ts';
import type { Store } from '../../src/sandbox/store/index.ts';
import { openPostgresStore } from '../../src/sandbox/store/postgres.ts';
import { type FreshDatabase, freshDatabase } from '../helpers/postgres.ts';
import { ADMIN_TOKEN, createTestSandbox, type TestSandbox } from '../helpers/sandbox.ts';

/**
 * Rate limits counted in one PostgreSQL database by the servers that share it (rateLimitCounts
 * 'database'): two apps, as two replicas, on one sandbox's chain and index, each with a store of
 * its own on one database. A client sent to them in turn is refused after its tier's limit in
 * total, with the 429 an app counting in memory gives. And a database that cannot count costs
 * neither a 500 nor a wait: the request is counted in the process instead.
 */
let sandbox: TestSandbox;
const databases: FreshDatabase[] = [];
const stores: Store[] = [];
const apps: App[] = [];
const proxies: PgProxy[] = [];
const MINUTE = 60_000;

/** The real app on `store`, on the sandbox's chain and index, counting in the database. */
async function replica(store: Store, logger: unknown = false): Promise<App> {
  const app = await buildApp({
    store,
    clock: sandbox.clock,
    chain: sandbox.chain,
    index: sandbox.runtime.index,
    onboarder: sandbox.runtime.onboarder,
    adminTokenHash: hashAdminToken(ADMIN_TOKEN),
    snapshots: undefined,
    stateDir: sandbox.dir,
    persistent: false,
    rateLimit: true,
    rateLimitCounts: 'database',
    trustProxy: false,
    logger: logger as false,
    connections: { maxConnections: 64, requestTimeoutMs: 30_000 },
    graphiql: false,
  });
  await app.ready();
  apps.push(app);
  return app;
}

async function database(): Promise<FreshDatabase> {
  const fresh = await freshDatabase();
  databases.push(fresh);
  return fresh;
}

async function storeOn(url: string): Promise<Store> {
  const store = await openPostgresStore(url);
  stores.push(store);
  return store;
}

beforeAll(async () => {
  // Its own app counts in memory: today's answers, to compare with.
  sandbox = await createTestSandbox({ rateLimit: true });
});
afterAll(async () => {
  for (const proxy of proxies) proxy.cut();
  for (const app of apps) await app.close();
  for (const store of stores) await store.close();
  for (const fresh of databases) await fresh.drop();
  for (const proxy of proxies) await proxy.close();
  await sandbox?.close();
});

/**
 * A 429 as a client sees it, but for the seconds left (which move while a test runs): its
 * status, its headers' names, its limit headers, and its body byte for byte otherwise.
 */
function refusal(response: LightMyRequestResponse) {
  expect(response.statusCode).toBe(429);
  const retryAfter = Number(response.headers['retry-after']);
  expect(Number.isInteger(retryAfter)).toBe(true);
  expect(retryAfter).toBeGreaterThan(0);
  expect(retryAfter).toBeLessThanOrEqual(60);
  const reset = response.headers['x-ratelimit-reset'];
  if (reset !== undefined) expect(Number(reset)).toBe(retryAfter);
  const varying = new Set(['date', 'content-length', 'x-sandbox-time']);
  return {
    headers: Object.keys(response.headers)
      .filter((name) => !varying.has(name))
      .sort(),
    limit: response.headers['x-ratelimit-limit'],
    remaining: response.headers['x-ratelimit-remaining'],
    contentType: response.headers['content-type'],
    body: response.body
      .replace(/retry in [^"]*"/g, 'retry in …"')
      .replace(/"retryAfter":\d+/g, '"retryAfter":0'),
  };
}

describe('two servers counting in one PostgreSQL database', () => {
  let a: App;
  let b: App;
  beforeAll(async () => {
    const shared = await database();
    a = await replica(await storeOn(shared.url));
    b = await replica(await storeOn(shared.url));
  });

  it('refuse a client sent to them in turn after Part A’s public limit in total', async () => {
    const urls = ['/health', '/api/v1/agents/stats'];
    for (let i = 0; i < 60; i++) {
      const response = await (i % 2 === 0 ? a : b).inject({
        url: urls[i % 4 < 2 ? 0 : 1] as string,
        remoteAddress: '10.20.0.1',
      });
      expect(response.statusCode).toBe(200);
    }
    const fromA = refusal(await a.inject({ url: '/health', remoteAddress: '10.20.0.1' }));
    const fromB = refusal(await b.inject({ url: '/health', remoteAddress: '10.20.0.1' }));
    // Another client is unaffected on either.
    expect((await b.inject({ url: '/health', remoteAddress: '10.20.0.2' })).statusCode).toBe(200);

    // Today's 429, from the app counting in memory.
    for (let i = 0; i < 60; i++) {
      await sandbox.app.inject({ url: '/health', remoteAddress: '10.20.0.3' });
    }
    const today = refusal(await sandbox.app.inject({ url: '/health', remoteAddress: '10.20.0.3' }));
    expect(fromA).toEqual(today);
    expect(fromB).toEqual(today);
  });

  it('refuse a client after its data tier’s minute limit in total, not per server', async () => {
    for (let i = 0; i < 60; i++) {
      const response = await (i % 2 === 0 ? a : b).inject({
        url: '/v1/protocol/stats',
        remoteAddress: '10.21.0.1',
      });
      expect(response.statusCode).toBe(200);
    }
    const fromB = refusal(
      await b.inject({ url: '/v1/protocol/stats', remoteAddress: '10.21.0.1' }),
    );
    const fromA = refusal(await a.inject({ url: '/v1/vaults', remoteAddress: '10.21.0.1' }));
    expect(JSON.parse(fromB.body).error.details.window).toBe('minute');

    for (let i = 0; i < 60; i++) {
      await sandbox.app.inject({ url: '/v1/protocol/stats', remoteAddress: '10.21.0.3' });
    }
    const today = refusal(
      await sandbox.app.inject({ url: '/v1/protocol/stats', remoteAddress: '10.21.0.3' }),
    );
    expect(fromB).toEqual(today);
    expect(fromA).toEqual(today);
  });
});

describe('a database that cannot count', () => {
  it('when its connections are cut: each request counted in the process, the limit held there', async () => {
    const fresh = await database();
    const proxy = await pgProxy(fresh.url);
    const lines: string[] = [];
    const app = await replica(await storeOn(proxy.url), {
      level: 'info',
      stream: { write: (line: string) => lines.push(line) },
    });
    expect((await app.inject({ url: '/health', remoteAddress: '10.30.0.1' })).statusCode).toBe(200);
    proxy.cut();
    for (let i = 0; i < 60; i++) {
      const response = await app.inject({ url: '/health', remoteAddress: '10.30.0.1' });
      expect(response.statusCode).toBe(200);
    }
    refusal(await app.inject({ url: '/health', remoteAddress: '10.30.0.1' }));
    // Said once, at warn, for the outage; not per request.
    const warnings = lines.filter((line) => line.includes('the database did not count'));
    expect(warnings).toHaveLength(1);
    expect(JSON.parse(warnings[0] as string).level).toBe(40);
  });

  it('when it stops answering: the request waits the count’s timeout at most, never hangs', async () => {
    const fresh = await database();
    const proxy = await pgProxy(fresh.url);
    const app = await replica(await storeOn(proxy.url));
    expect((await app.inject({ url: '/health', remoteAddress: '10.31.0.1' })).statusCode).toBe(200);
    // Connections stay open, and nothing more comes through them: a database gone silent.
    proxy.freeze();
    for (let i = 0; i < 60; i++) {
      const response = await app.inject({ url: '/health', remoteAddress: '10.31.0.1' });
      expect(response.statusCode).toBe(200);
    }
    refusal(await app.inject({ url: '/health', remoteAddress: '10.31.0.1' }));
  });
});

describe('the database counter (rate-counter.ts) on a database that goes and comes back', () => {
  it('counts in memory meanwhile, bounded, then in the database again', async () => {
    const fresh = await database();
    const proxy = await pgProxy(fresh.url);
    const store = await storeOn(proxy.url);
    const lines: string[] = [];
    const counter = createDatabaseCounter({
      counts: store.rateCounts,
      log: { warn: (line) => lines.push(`warn: ${line}`), info: (line) => lines.push(line) },
      // The database is tried again at once, and the memory holds three windows.
      localAfterFailureMs: 0,
      localMaxWindows: 3,
      maxRows: 1,
    });
    const limiter = new counter.Store({});
    const count = (key: string) =>
      new Promise<number>((resolve, reject) =>
        limiter.incr(
          key,
          (error, result) => (error ? reject(error) : resolve(result?.current as number)),
          MINUTE,
          10,
        ),
      );
    expect(await count('k1')).toBe(1);
    proxy.cut();
    // In memory: windows of its own.
    expect(await count('k1')).toBe(1);
    expect(await count('k1')).toBe(2);
    for (const key of ['k2', 'k3', 'k4']) expect(await count(key)).toBe(1);
    // Four windows for three places: k1's, the least recently counted, was forgotten.
    expect(await count('k4')).toBe(2);
    expect(await count('k1')).toBe(1);
    proxy.reopen();
    // In the database again: its window holds the first request, and now this one.
    expect(await count('k1')).toBe(2);
    expect(await store.rateCounts.peek('k1', MINUTE)).toMatchObject({ count: 2 });
    expect(await store.rateCounts.peek('k4', MINUTE)).toBeUndefined();
    expect(lines).toHaveLength(2);
    expect(lines[0]).toMatch(/^warn: rate limits: the database did not count a request/);
    expect(lines[1]).toBe('rate limits: counting in the database again');
    // Its purge keeps the table to its bound (one row here): the fewest requests go first.
    expect(await count('k5')).toBe(1);
    await counter.purge();
    expect(await store.rateCounts.size()).toBe(1);
    expect(await store.rateCounts.peek('k1', MINUTE)).toMatchObject({ count: 2 });
    expect(lines[2]).toMatch(/^warn: rate limits: 1 counts forgotten/);
  });
});

interface PgProxy {
  url: string;
  /** Relays nothing more; connections stay open and new ones are taken, then left silent. */
  freeze(): void;
  /** Resets every connection, and each new one. */
  cut(): void;
  /** Relays new connections again. */
  reopen(): void;
  close(): Promise<void>;
}

/** A TCP relay in front of the PostgreSQL server of `url`: the database's URL through it. */
async function pgProxy(url: string): Promise<PgProxy> {
  const target = new URL(url);
  let state: 'open' | 'frozen' | 'cut' = 'open';
  const sockets = new Set<Socket>();
  const keep = (socket: Socket) => {
    sockets.add(socket);
    socket.on('error', () => undefined);
    socket.on('close', () => sockets.delete(socket));
  };
  const server: Server = createServer((client) => {
    keep(client);
    if (state === 'cut') {
      client.resetAndDestroy();
      return;
    }
    if (state === 'frozen') return;
    const upstream = connect(Number(target.port), target.hostname);
    keep(upstream);
    client.on('data', (data) => state === 'open' && upstream.write(data));
    upstream.on('data', (data) => state === 'open' && client.write(data));
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address() as { port: number };
  const through = new URL(url);
  through.hostname = '127.0.0.1';
  through.port = String(address.port);
  const proxy: PgProxy = {
    url: through.toString(),
    freeze() {
      state = 'frozen';
    },
    cut() {
      state = 'cut';
      for (const socket of sockets) socket.resetAndDestroy();
    },
    reopen() {
      state = 'open';
    },
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
  proxies.push(proxy);
  return proxy;
}
