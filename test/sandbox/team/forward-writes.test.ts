import type { AddressInfo } from 'node:net';
import Fastify, { type FastifyInstance } from 'fastify';
import { request } from 'undici';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { openPostgresStore } from '../../../src/sandbox/store/postgres.ts';
import {
  isForwarded,
  registerWriteForwarding,
  writerUrlFrom,
} from '../../../src/sandbox/team/forward-writes.ts';
import { createWriterLock, type WriterLock } from '../../../src/sandbox/team/writer-lock.ts';
import { type FreshDatabase, freshDatabase } from '../../helpers/postgres.ts';

/**
 * A replica's writes forwarded to the writer. The writer here is a small Fastify app standing
 * in for it (the real writer's serve --database is wired elsewhere): it records what it
 * received, byte for byte, and answers what each case sets. The replica is a Fastify app with
 * the forwarding plugin and one read of its own; both listen on loopback, and the client is
 * undici, so every byte crosses real sockets.
 */
const LIMIT = 1024;

interface Received {
  method: string;
  url: string;
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
}

let writer: FastifyInstance;
let writerUrl: string;
let replica: FastifyInstance;
let replicaUrl: string;
const received: Received[] = [];
/** What the writer answers next. */
let answer: {
  status: number;
  headers: Record<string, string>;
  body: string;
  /** Never answers (a writer that hangs). */
  hang?: boolean;
};
/** What the replica is told of the writer's URL, call after call. */
let urls: Array<string | undefined>;
let urlReads = 0;

const listen = async (app: FastifyInstance) => {
  await app.listen({ port: 0, host: '127.0.0.1' });
  return `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
};

/** A URL nothing listens on: a server's, closed. */
async function deadUrl(): Promise<string> {
  const gone = Fastify();
  const url = await listen(gone);
  await gone.close();
  return url;
}

beforeAll(async () => {
  // A hanging request must not hold the close.
  writer = Fastify({ forceCloseConnections: true });
  writer.removeAllContentTypeParsers();
  writer.addContentTypeParser('*', { parseAs: 'buffer' }, (_request, body, done) =>
    done(null, body),
  );
  writer.all('/*', async (req, reply) => {
    received.push({
      method: req.method,
      url: req.url,
      headers: req.headers,
      body: (req.body as Buffer | undefined) ?? Buffer.alloc(0),
    });
    if (answer.hang) return new Promise(() => undefined);
    return reply.code(answer.status).headers(answer.headers).send(answer.body);
  });
  writerUrl = await listen(writer);

  replica = Fastify({ bodyLimit: LIMIT });
  registerWriteForwarding(replica, {
    bodyLimit: LIMIT,
    answerTimeoutMs: 500,
    // Read for every request: each case says where the writer is.
    cacheMs: 0,
    writerUrl: async () => {
      urlReads++;
      return urls.length > 1 ? urls.shift() : urls[0];
    },
  });
  replica.post('/api/v1/positions', async () => ({ answered_by: 'replica' }));
  replica.get('/health', async () => ({ answered_by: 'replica' }));
  replicaUrl = await listen(replica);
});
afterAll(async () => {
  await replica?.close();
  await writer?.close();
});
beforeEach(() => {
  received.length = 0;
  urlReads = 0;
  answer = { status: 200, headers: { 'content-type': 'application/json' }, body: '{}' };
  urls = [writerUrl];
});

describe('a replica forwarding writes to the writer', () => {
  it('sends the writer what the client sent, and relays its answer byte for byte', async () => {
    // Not canonical JSON, and not ASCII: re-serialising anywhere would show.
    const body = '{"vault_id":"moderate",  "amount": "1.50", "note":"é"}';
    answer = {
      status: 201,
      headers: {
        'content-type': 'application/json; charset=utf-8',
        'idempotent-replayed': 'true',
        'retry-after': '7',
        'x-ratelimit-limit': '60',
        'x-ratelimit-remaining': '59',
      },
      body: '{ "deposit_tx" : "0xabc",\n "shares":"1.5" }',
    };
    const res = await request(`${replicaUrl}/api/v1/agent/vault/deposit?dry=1&x=%20`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'x-api-key': 'ak_test_key',
        authorization: 'Bearer t0k3n',
        'idempotency-key': 'k-123',
        'x-admin-token': 'admin-secret',
        'x-forwarded-for': '203.0.113.9',
        cookie: 'not=forwarded',
        'x-something-else': 'not forwarded',
      },
      body,
    });
    expect(res.statusCode).toBe(201);
    expect(res.headers['idempotent-replayed']).toBe('true');
    expect(res.headers['retry-after']).toBe('7');
    expect(res.headers['x-ratelimit-limit']).toBe('60');
    expect(res.headers['x-ratelimit-remaining']).toBe('59');
    expect(res.headers['content-type']).toBe('application/json; charset=utf-8');
    expect(Buffer.from(await res.body.arrayBuffer()).toString()).toBe(answer.body);

    expect(received).toHaveLength(1);
    const [sent] = received as [Received];
    expect(sent.method).toBe('POST');
    expect(sent.url).toBe('/api/v1/agent/vault/deposit?dry=1&x=%20');
    expect(sent.body.toString()).toBe(body);
    expect(sent.headers).toMatchObject({
      'content-type': 'application/json',
      'x-api-key': 'ak_test_key',
      authorization: 'Bearer t0k3n',
      'idempotency-key': 'k-123',
      'x-admin-token': 'admin-secret',
      // The client's address appended: the writer counts the client, not the replica.
      'x-forwarded-for': '203.0.113.9, 127.0.0.1',
    });
    expect(sent.headers.cookie).toBeUndefined();
    expect(sent.headers['x-something-else']).toBeUndefined();
  });

  it('relays the writer’s errors as they are', async () => {
    answer = {
      status: 429,
      headers: { 'content-type': 'application/json', 'retry-after': '30' },
      body: '{"error":"rate limit exceeded"}',
    };
    const res = await request(`${replicaUrl}/api/v1/agent/faucet`, { method: 'POST' });
    expect(res.statusCode).toBe(429);
    expect(res.headers['retry-after']).toBe('30');
    expect(await res.body.text()).toBe(answer.body);
    expect(received[0]?.body.length).toBe(0);
  });

  it('answers reads itself, and forwards what is about snapshots', async () => {
    const positions = await request(`${replicaUrl}/api/v1/positions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"address":"0x0"}',
    });
    expect(await positions.body.json()).toEqual({ answered_by: 'replica' });
    const health = await request(`${replicaUrl}/health`);
    expect(await health.body.json()).toEqual({ answered_by: 'replica' });
    expect(received).toHaveLength(0);
    const snapshots = await request(`${replicaUrl}/sandbox/snapshots`);
    await snapshots.body.dump();
    expect(received.map((each) => `${each.method} ${each.url}`)).toEqual([
      'GET /sandbox/snapshots',
    ]);
    expect(isForwarded('DELETE', '/sandbox/snapshots/a')).toBe(true);
    expect(isForwarded('POST', '/graphql')).toBe(false);
    expect(isForwarded('POST', '/api/v1/nfts?x=1')).toBe(false);
    expect(isForwarded('GET', '/sandbox/info')).toBe(false);
    expect(isForwarded('GET', '/api/v1/vaults')).toBe(false);
    // What only the writer can answer: a nonce (a row, and its domain), a wallet's balances.
    expect(isForwarded('GET', '/api/v1/agent/auth/nonce?wallet=0x1')).toBe(true);
    expect(isForwarded('GET', '/api/v1/agent/wallet')).toBe(false);
  });

  it('refuses a body past the app’s bound with 413, sending nothing', async () => {
    const res = await request(`${replicaUrl}/api/v1/agent/strategy/submit`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: `{"name":"${'x'.repeat(LIMIT)}"}`,
    });
    expect(res.statusCode).toBe(413);
    expect(await res.body.json()).toEqual({
      error: 'request body is too large: the limit is 1 KiB',
    });
    expect(received).toHaveLength(0);
  });

  it('answers 503 with Retry-After when the writer cannot be reached', async () => {
    const dead = await deadUrl();
    urls = [dead];
    const res = await request(`${replicaUrl}/api/v1/agent/governance/vote`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{}',
    });
    expect(res.statusCode).toBe(503);
    expect(res.headers['retry-after']).toBe('2');
    const { error } = (await res.body.json()) as { error: string };
    expect(error).toContain(`the writer at ${dead}/ cannot be reached (ECONNREFUSED)`);
    // It read the URL again, in case another writer took over: the same.
    expect(urlReads).toBe(2);
  });

  it('reads the writer’s URL again when it cannot be reached, and sends the write to the new one', async () => {
    const dead = await deadUrl();
    // The cached URL is the old writer's; the database now says the new one's.
    urls = [dead, writerUrl];
    const res = await request(`${replicaUrl}/sandbox/clock/advance`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"seconds":60}',
    });
    expect(res.statusCode).toBe(200);
    await res.body.dump();
    expect(received.map((each) => each.body.toString())).toEqual(['{"seconds":60}']);
    expect(urlReads).toBe(2);
  });

  it('answers 503 when no writer has recorded where it serves', async () => {
    urls = [undefined];
    const res = await request(`${replicaUrl}/sandbox/fund`, { method: 'POST' });
    expect(res.statusCode).toBe(503);
    expect(res.headers['retry-after']).toBe('2');
    expect(((await res.body.json()) as { error: string }).error).toMatch(
      /no writer serves this sandbox now/,
    );
  });

  it('answers 504 when the writer took the request and does not answer in time', async () => {
    answer = { ...answer, hang: true };
    const res = await request(`${replicaUrl}/api/v1/agent/vault/deposit`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'idempotency-key': 'k-9' },
      body: '{}',
    });
    expect(res.statusCode).toBe(504);
    expect(((await res.body.json()) as { error: string }).error).toMatch(
      /did not answer within 0.5 s: the write may have been made; retry with the same Idempotency-Key/,
    );
    expect(received).toHaveLength(1);
  });
});

describe('the writer’s URL, as the writer recorded it in the database', () => {
  let database: FreshDatabase;
  let store: Awaited<ReturnType<typeof openPostgresStore>>;
  let lock: WriterLock;
  let replicaStore: Awaited<ReturnType<typeof openPostgresStore>>;
  let fromDatabase: FastifyInstance;
  let fromDatabaseUrl: string;

  beforeAll(async () => {
    database = await freshDatabase();
    lock = createWriterLock({ database: database.name, onLost: () => undefined });
    store = await openPostgresStore(database.url, lock.hooks);
    // A replica's own store: no writer hooks, no lock.
    replicaStore = await openPostgresStore(database.url);
    fromDatabase = Fastify();
    registerWriteForwarding(fromDatabase, {
      bodyLimit: LIMIT,
      writerUrl: writerUrlFrom(replicaStore.sql.standalone),
    });
    fromDatabaseUrl = await listen(fromDatabase);
  });
  afterAll(async () => {
    await fromDatabase?.close();
    await replicaStore?.close();
    await lock?.release();
    await store?.close();
    await database?.drop();
  });

  it('is unknown until the writer announces it, then writes go there', async () => {
    const before = await request(`${fromDatabaseUrl}/sandbox/fund`, { method: 'POST' });
    expect(before.statusCode).toBe(503);
    expect(((await before.body.json()) as { error: string }).error).toMatch(/no writer serves/);
    await lock.announce(writerUrl);
    answer = { status: 200, headers: { 'content-type': 'application/json' }, body: '{"ok":1}' };
    // The cached "none" is read again: no writer is a failure to reach one.
    const after = await request(`${fromDatabaseUrl}/sandbox/fund`, { method: 'POST' });
    expect(after.statusCode).toBe(200);
    expect(await after.body.text()).toBe('{"ok":1}');
    expect(received.map((each) => `${each.method} ${each.url}`)).toEqual(['POST /sandbox/fund']);
  });
});
