import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Fastify, { type FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Health } from '../../../src/api/schemas/index.ts';
import { registerErrorHandling } from '../../../src/sandbox/plugins/errors.ts';
import { serializerCompiler, validatorCompiler } from '../../../src/sandbox/plugins/zod.ts';
import { registerHealthRoutes } from '../../../src/sandbox/routes/health.ts';
import type { App, RouteDeps } from '../../../src/sandbox/routes/types.ts';
import { openPostgresStore } from '../../../src/sandbox/store/postgres.ts';
import { probeDatabase } from '../../../src/sandbox/team/database-health.ts';
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

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'agentctl-database-down-'));
  database = await freshDatabase();
  const url = new URL(database.url);
  cut = await startTcpCut({ host: url.hostname, port: Number(url.port) });
  url.port = String(cut.port);
  store = await openPostgresStore(url.toString());
  app = Fastify();
  app.setValidatorCompiler(validatorCompiler);
  app.setSerializerCompiler(serializerCompiler);
  registerErrorHandling(app, dir);
  const deps = {
    limits: { public: async () => undefined },
    chain: { isConnected: async () => true, chainId: 31337, chainName: 'sandbox' },
    index: { failure: () => undefined },
    databaseHealth: probeDatabase(store.sql.standalone),
  } as unknown as RouteDeps;
  registerHealthRoutes(app as unknown as App, deps);
  app.get('/api/v1/agents/count', async () => ({ count: await store.agents.count() }));
});
afterAll(async () => {
  await app?.close();
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

    cut.cut();
    const refused = await app.inject({ method: 'GET', url: '/api/v1/agents/count' });
    expect(refused.statusCode).toBe(503);
    expect(refused.headers['retry-after']).toBe('2');
    expect(refused.json().error).toMatch(
      /^the sandbox's database cannot be reached \(.+\); retry shortly$/,
    );
    const down = await health();
    expect(down.status).toBe('degraded');
    expect(down.database?.reachable).toBe(false);
    expect(down.database?.reason).toMatch(/^the sandbox's database cannot be reached \(.+\)$/);
    expect(down.reason).toBe(
      `${down.database?.reason}; requests that need it answer 503 until it is back`,
    );

    cut.restore();
    expect(await health()).toEqual(
      expect.objectContaining({ status: 'ok', database: { reachable: true } }),
    );
    expect((await health()).reason).toBeUndefined();
    const back = await app.inject({ method: 'GET', url: '/api/v1/agents/count' });
    expect(back.statusCode).toBe(200);
  });
});
