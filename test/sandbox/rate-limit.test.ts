import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { afterEach, describe, expect, it } from 'vitest';
import { createTestSandbox, registeredAgent, type TestSandbox } from '../helpers/sandbox.ts';

let sandbox: TestSandbox | undefined;
afterEach(async () => {
  await sandbox?.close();
  sandbox = undefined;
});

async function open(
  options: { trustProxy?: boolean; rateLimitCounts?: 'memory' | 'database' } = {},
) {
  sandbox = await createTestSandbox({ rateLimit: true, ...options });
  return sandbox.app;
}

/** Where the windows are counted: memory (the default), or the database (SQLite here). */
const COUNTS = ['memory', 'database'] as const;

function expectLimited(response: {
  statusCode: number;
  headers: Record<string, unknown>;
  json(): { error: string };
}) {
  expect(response.statusCode).toBe(429);
  expect(response.json().error).toContain('rate limit exceeded');
  const retryAfter = Number(response.headers['retry-after']);
  expect(Number.isInteger(retryAfter)).toBe(true);
  expect(retryAfter).toBeGreaterThan(0);
  expect(retryAfter).toBeLessThanOrEqual(60);
}

describe.each(COUNTS)('public limit, counted in %s', (rateLimitCounts) => {
  it('answers the 61st request with 429 and Retry-After, across endpoints', async () => {
    const app = await open({ rateLimitCounts });
    const urls = ['/health', '/api/v1/agents', '/api/v1/agents/stats'];
    for (let i = 0; i < 60; i++) {
      const response = await app.inject({ url: urls[i % urls.length] as string });
      expect(response.statusCode).toBe(200);
    }
    expectLimited(await app.inject({ url: '/health' }));
    expectLimited(await app.inject({ url: '/api/v1/agents/stats' }));
    // Another client is unaffected.
    const other = await app.inject({ url: '/health', remoteAddress: '10.0.0.2' });
    expect(other.statusCode).toBe(200);
  });
});

describe('public limit: 60 per minute per IP, shared by the public endpoints', () => {
  it('ignores a spoofed X-Forwarded-For unless trust-proxy is on', async () => {
    const app = await open();
    for (let i = 0; i < 60; i++) {
      await app.inject({ url: '/health', headers: { 'x-forwarded-for': `198.51.100.${i}` } });
    }
    expectLimited(
      await app.inject({ url: '/health', headers: { 'x-forwarded-for': '203.0.113.7' } }),
    );
  });

  it('with trust-proxy, keys on the address the proxy appended, not what the client wrote', async () => {
    const app = await open({ trustProxy: true });
    for (let i = 0; i < 60; i++) {
      await app.inject({
        url: '/health',
        headers: { 'x-forwarded-for': `198.51.100.${i}, 203.0.113.9` },
      });
    }
    expectLimited(
      await app.inject({ url: '/health', headers: { 'x-forwarded-for': '1.2.3.4, 203.0.113.9' } }),
    );
  });

  it('keys on X-Forwarded-For with trust-proxy', async () => {
    const app = await open({ trustProxy: true });
    for (let i = 0; i < 60; i++) {
      await app.inject({ url: '/health', headers: { 'x-forwarded-for': '198.51.100.1' } });
    }
    expectLimited(
      await app.inject({ url: '/health', headers: { 'x-forwarded-for': '198.51.100.1' } }),
    );
    const other = await app.inject({
      url: '/health',
      headers: { 'x-forwarded-for': '198.51.100.2' },
    });
    expect(other.statusCode).toBe(200);
  });
});

describe.each(COUNTS)('per-key limits, counted in %s', (rateLimitCounts) => {
  it('allows 10 writes per minute per API key, shared by deposit, submit and vote', async () => {
    const app = await open({ rateLimitCounts });
    const alice = await registeredAgent(app);
    const bob = await registeredAgent(app);
    const write = (apiKey: string, url: string) =>
      app.inject({ method: 'POST', url, headers: { 'x-api-key': apiKey }, payload: {} });
    const urls = [
      '/api/v1/agent/vault/deposit',
      '/api/v1/agent/strategy/submit',
      '/api/v1/agent/governance/vote',
    ];
    for (let i = 0; i < 10; i++) {
      const response = await write(alice.apiKey, urls[i % 3] as string);
      expect(response.statusCode).not.toBe(429);
    }
    expectLimited(await write(alice.apiKey, '/api/v1/agent/vault/deposit'));
    expectLimited(await write(alice.apiKey, '/api/v1/agent/governance/vote'));
    // The limiter answers 429 and never 403, even far over the limit.
    for (let i = 0; i < 20; i++) {
      expect((await write(alice.apiKey, urls[0] as string)).statusCode).toBe(429);
    }
    // Bob, from the same IP, has his own budget.
    expect((await write(bob.apiKey, urls[0] as string)).statusCode).not.toBe(429);
  });

  it('allows 5 faucet requests per minute per API key', async () => {
    const app = await open({ rateLimitCounts });
    const { apiKey } = await registeredAgent(app);
    const faucet = () =>
      app.inject({ method: 'POST', url: '/api/v1/agent/faucet', headers: { 'x-api-key': apiKey } });
    // The first drips; the next four are the faucet's own cooldown answer, not the limiter.
    expect((await faucet()).statusCode).toBe(200);
    for (let i = 0; i < 4; i++) expect((await faucet()).json().success).toBe(false);
    expectLimited(await faucet());
    if (rateLimitCounts === 'database') {
      // Counted in sandbox.db: the scope and the agent, never the API key.
      const rows = await (sandbox as TestSandbox).store.rateCounts.size();
      expect(rows).toBeGreaterThan(0);
      const keys = await rateCountKeys();
      expect(keys.some((key) => key.startsWith('faucet:agent:'))).toBe(true);
      expect(keys.some((key) => key.includes(apiKey))).toBe(false);
    }
  });
});

describe('per-key limits', () => {
  it('gives made-up keys no buckets, so they can neither dodge nor flush the limit', async () => {
    const app = await open();
    const { apiKey } = await registeredAgent(app);
    const deposit = (key: string) =>
      app.inject({
        method: 'POST',
        url: '/api/v1/agent/vault/deposit',
        headers: { 'x-api-key': key },
        payload: {},
      });
    for (let i = 0; i < 10; i++) expect((await deposit(apiKey)).statusCode).toBe(400);
    // More made-up keys than the limiter keeps buckets for (5000).
    for (let i = 0; i < 5100; i++) {
      expect((await deposit(`agk_${i.toString(16).padStart(64, '0')}`)).statusCode).toBe(401);
    }
    expectLimited(await deposit(apiKey));
  });
});

/** The keys of sandbox.db's rate counts, read from the file. */
async function rateCountKeys(): Promise<string[]> {
  const db = new DatabaseSync(join((sandbox as TestSandbox).dir, 'sandbox.db'), { readOnly: true });
  try {
    return (db.prepare('SELECT key FROM rate_counts').all() as Array<{ key: string }>).map(
      (row) => row.key,
    );
  } finally {
    db.close();
  }
}
