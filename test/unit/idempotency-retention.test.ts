import { createHash, randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Fastify from 'fastify';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { z } from 'zod';
import {
  IDEMPOTENCY_RETENTION_SECONDS,
  IdempotentWriteHeaders,
  MAX_IDEMPOTENCY_KEYS,
  MAX_IDEMPOTENCY_KEYS_PER_CALLER,
} from '../../src/api/schemas/index.ts';
import { clientErrorOf } from '../../src/sandbox/plugins/errors.ts';
import { createIdempotency } from '../../src/sandbox/plugins/idempotency.ts';
import { serializerCompiler, validatorCompiler } from '../../src/sandbox/plugins/zod.ts';
import { openStore, type Store } from '../../src/sandbox/store/index.ts';

/**
 * Retention and bounds of Idempotency-Key, on a real SQLite store, with the wall clock moved by
 * hand (24 hours cannot be waited for): a keyed route whose write counts how often it ran.
 */
let dir = '';
let store: Store;
let wallMs = 0;
let runs = 0;
let keys: ReturnType<typeof createIdempotency>;
let app: ReturnType<typeof Fastify>;

beforeEach(async () => {
  dir = mkdtempSync(join(tmpdir(), 'agentctl-idempotency-'));
  store = openStore(join(dir, 'sandbox.db'), { durable: false });
  wallMs = Date.UTC(2026, 10, 26);
  runs = 0;
  app = Fastify();
  app.setValidatorCompiler(validatorCompiler);
  app.setSerializerCompiler(serializerCompiler);
  keys = createIdempotency({
    store,
    errorAnswer: (error) => clientErrorOf(error, dir),
    log: app.log,
    nowMs: () => wallMs,
  });
  app.post(
    '/write',
    {
      schema: {
        headers: IdempotentWriteHeaders,
        body: z.object({ n: z.number() }),
        response: { 200: z.object({ run: z.number() }) },
      },
    },
    keys.keyed(
      (request) => (request.headers['x-caller'] as string | undefined) ?? 'writer',
      async (request) =>
        store.commitSoon(async (tx) => {
          runs++;
          const answer = { run: runs };
          await keys.answerOf(request).commit(tx, answer);
          return answer;
        }),
    ),
  );
  await app.ready();
});

afterEach(async () => {
  keys.close();
  await app.close();
  await store.close();
  rmSync(dir, { recursive: true, force: true });
});

const write = (key?: string, caller?: string) =>
  app.inject({
    method: 'POST',
    url: '/write',
    headers: {
      ...(key !== undefined && { 'idempotency-key': key }),
      ...(caller !== undefined && { 'x-caller': caller }),
    },
    payload: { n: 1 },
  });

/** Stores `count` fresh keys directly, the i-th in scope `scopeOf(i)` (already hashed). */
const fill = (count: number, scopeOf: (i: number) => string) =>
  store.transaction(async (tx) => {
    for (let i = 0; i < count; i++) {
      await tx.idempotency.insert({
        id: `filler-${i}`,
        scope: scopeOf(i),
        fingerprint: 'x',
        status: 200,
        answer: new Uint8Array(1),
        created_ms: wallMs,
        outlives_restore: 0,
      });
    }
  });

describe('Idempotency-Key retention', () => {
  it('keeps a key 24 hours of wall-clock time, and purges it after', async () => {
    const key = randomUUID();
    expect((await write(key)).json()).toEqual({ run: 1 });
    wallMs += IDEMPOTENCY_RETENTION_SECONDS * 1000 - 1;
    await keys.recount();
    const kept = await write(key);
    expect(kept.headers['idempotent-replayed']).toBe('true');
    expect(kept.json()).toEqual({ run: 1 });
    wallMs += 2;
    await keys.recount();
    expect(await store.idempotency.count()).toBe(0);
    const again = await write(key);
    expect(again.headers['idempotent-replayed']).toBe('false');
    expect(again.json()).toEqual({ run: 2 });
  });

  it('refuses a new key at its bound with 429, not a write without a key, until keys expire', async () => {
    // Filled directly: as many keys as the bound, all fresh.
    // Spread over callers, so that only the bound of all keys is reached.
    await fill(MAX_IDEMPOTENCY_KEYS, (i) => `caller-${i % 100}`);
    await keys.recount();
    const refused = await write(randomUUID());
    expect(refused.statusCode).toBe(429);
    expect(refused.headers['retry-after']).toBe('60');
    // (This bare app has Fastify's own error shape; the sandbox's is {"error": …}.)
    expect(refused.json().message).toMatch(/idempotency keys/);
    expect(runs).toBe(0);
    expect((await write()).statusCode).toBe(200);
    expect(runs).toBe(1);

    wallMs += IDEMPOTENCY_RETENTION_SECONDS * 1000 + 1;
    const accepted = await write(randomUUID());
    expect(accepted.statusCode).toBe(200);
    expect(await store.idempotency.count()).toBe(1);
  });

  it("bounds one caller's keys, so that one caller cannot take every key", async () => {
    const scope = createHash('sha256').update('writer').digest('hex');
    await fill(MAX_IDEMPOTENCY_KEYS_PER_CALLER, () => scope);
    await keys.recount();
    const refused = await write(randomUUID());
    expect(refused.statusCode).toBe(429);
    expect(refused.json().message).toMatch(/this caller holds/);
    expect(runs).toBe(0);
    // Another caller's key is taken.
    expect((await write(randomUUID(), 'another')).statusCode).toBe(200);
    expect(runs).toBe(1);
  });
});

describe('Idempotency-Key when the store answers slowly', () => {
  it('runs a key once when two requests with it look it up at the same time', async () => {
    // A database across the network (PostgreSQL) answers after a while: both lookups are
    // under way at once, and neither finds the key stored yet.
    const find = store.idempotency.find.bind(store.idempotency);
    vi.spyOn(store.idempotency, 'find').mockImplementation(async (id) => {
      await new Promise((resolve) => setTimeout(resolve, 20));
      return find(id);
    });
    const key = randomUUID();
    const answers = await Promise.all([write(key), write(key)]);
    expect(runs).toBe(1);
    expect(answers.map((answer) => answer.statusCode).sort()).toEqual([200, 409]);
  });
});
