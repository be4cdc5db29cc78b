import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Fastify, { type FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Health } from '../../../src/api/schemas/index.ts';
import { GENESIS } from '../../../src/sandbox/chain/genesis.ts';
import type { SandboxChain } from '../../../src/sandbox/chain/index.ts';
import {
  INDEX_SCHEMA,
  migrateIndexPostgres,
} from '../../../src/sandbox/indexer/schema-postgres.ts';
import { registerErrorHandling } from '../../../src/sandbox/plugins/errors.ts';
import { serializerCompiler, validatorCompiler } from '../../../src/sandbox/plugins/zod.ts';
import { registerDataRoutes } from '../../../src/sandbox/routes/data.ts';
import { registerHealthRoutes } from '../../../src/sandbox/routes/health.ts';
import type { App, RouteDeps } from '../../../src/sandbox/routes/types.ts';
import { createPostgresBackend, openPostgresStore } from '../../../src/sandbox/store/postgres.ts';
import { probeDatabase } from '../../../src/sandbox/team/database-health.ts';
import {
  openReplicaIndex,
  type ReplicaIndex,
  replicaIndexReads,
} from '../../../src/sandbox/team/replica-index.ts';
import { type FreshDatabase, freshDatabase } from '../../helpers/postgres.ts';
import { startTcpCut, type TcpCut } from '../../helpers/tcp-cut.ts';

/**
 * A sandbox whose PostgreSQL database cannot be reached (a replica's, or a writer's): requests
 * that need it answer 503 with Retry-After, never 500, and /health says why; once the database
 * is back, they answer again. The database is really cut off, by a TCP proxy in front of it.
 * The app is the sandbox's error handling and /health route with a store on PostgreSQL, and a
 * read of the store standing in for Part A's (a replica's assembly, serve --replica, is tested
 * whole where it is built); the chain is a stand-in that always answers (a replica has none).
 */
let database: FreshDatabase;
let cut: TcpCut;
let store: Awaited<ReturnType<typeof openPostgresStore>>;
let app: FastifyInstance;
let dir: string;
let replica: ReplicaIndex;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'agentctl-database-down-'));
  database = await freshDatabase();
  const url = new URL(database.url);
  cut = await startTcpCut({ host: url.hostname, port: Number(url.port) });
  url.port = String(cut.port);
  store = await openPostgresStore(url.toString());
  // The index's schema, as a writer leaves it (empty: no chain was indexed).
  const indexSchema = await createPostgresBackend(database.url, {
    schema: INDEX_SCHEMA,
    migrate: (client) => migrateIndexPostgres(client, 'a chain', () => undefined),
  });
  await indexSchema.close();
  replica = await openReplicaIndex({ url: url.toString(), log: { warn: () => undefined } });
  const chain = {
    isConnected: async () => true,
    chainId: 31337,
    chainName: 'sandbox',
    deployment: GENESIS.deployment,
  } as unknown as SandboxChain;
  app = Fastify();
  app.setValidatorCompiler(validatorCompiler);
  app.setSerializerCompiler(serializerCompiler);
  registerErrorHandling(app, dir);
  const deps = {
    limits: { public: async () => undefined, data: async () => undefined },
    chain,
    store,
    index: replicaIndexReads(replica, { chain, store }),
    databaseHealth: probeDatabase(store.sql.standalone),
  } as unknown as RouteDeps;
  registerHealthRoutes(app as unknown as App, deps);
  registerDataRoutes(app as unknown as App, deps);
  app.get('/api/v1/agents/count', async () => ({ count: await store.agents.count() }));
});
afterAll(async () => {
  await app?.close();
  await replica?.close();
  await store?.close();
  await cut?.close();
  await database?.drop();
  rmSync(dir, { recursive: true, force: true });
});

const health = async () => {
  const res = await app.inject({ method: 'GET', url: '/health' });
  expect(res.statusCode).toBe(200);
  return Health.parse(res.json());
};

describe('a sandbox cut off from its database', () => {
  it('answers 503 with Retry-After, says why on /health, and answers again once it is back', async () => {
    expect(await health()).toMatchObject({ status: 'ok', database: { reachable: true } });
    expect((await app.inject({ method: 'GET', url: '/api/v1/agents/count' })).json()).toEqual({
      count: 0,
    });

    expect((await app.inject({ method: 'GET', url: '/v1/vaults' })).statusCode).toBe(200);

    cut.cut();
    const refused = await app.inject({ method: 'GET', url: '/api/v1/agents/count' });
    expect(refused.statusCode).toBe(503);
    expect(refused.headers['retry-after']).toBe('2');
    expect(refused.json().error).toMatch(
      /^the sandbox's database cannot be reached \(.+\); retry shortly$/,
    );
    // Anyone may read these: they name no host or port of the database.
    const addressed = new RegExp(`127\\.0\\.0\\.1|:(${cut.port}|${new URL(database.url).port})\\b`);
    expect(refused.body).not.toMatch(addressed);
    const down = await health();
    expect(JSON.stringify(down)).not.toMatch(addressed);
    expect(down.status).toBe('degraded');
    expect(down.database?.reachable).toBe(false);
    expect(down.database?.reason).toMatch(/^the sandbox's database cannot be reached \(.+\)$/);
    expect(down.reason).toBe(
      `${down.database?.reason}; requests that need it answer 503 until it is back`,
    );

    // /v1 says it in the spec's error object: the index (the replica's read) and the API key
    // (the store's) alike.
    // A read never made before (no answer kept), then what was answered before the cut: the
    // failed read dropped what answer caches kept. Then an API key, looked up in the store.
    const user = '0x00000000000000000000000000000000000000aa';
    for (const [url, headers] of [
      [`/v1/users/${user}/transactions`, {}],
      ['/v1/vaults', {}],
      ['/v1/vaults', { 'x-api-key': 'ak_some_key' }],
    ] as const) {
      const v1 = await app.inject({ method: 'GET', url, headers });
      expect(v1.statusCode).toBe(503);
      expect(v1.headers['retry-after']).toBe('1');
      expect(v1.json().error).toMatchObject({
        code: 'INDEX_UNAVAILABLE',
        message: expect.stringMatching(/database cannot be reached/),
      });
      expect(v1.body).not.toMatch(addressed);
    }

    cut.restore();
    const back = await app.inject({ method: 'GET', url: '/api/v1/agents/count' });
    expect(back.statusCode).toBe(200);
    // The replica's index knows the database is back once it reads it (a request, or its
    // listener's reconnect): /health says so from then on.
    expect((await app.inject({ method: 'GET', url: '/v1/vaults' })).statusCode).toBe(200);
    expect(await health()).toEqual(
      expect.objectContaining({ status: 'ok', database: { reachable: true } }),
    );
    expect((await health()).reason).toBeUndefined();
  });
});
