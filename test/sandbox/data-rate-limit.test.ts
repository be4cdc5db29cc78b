import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { DATA_TIERS } from '../../src/sandbox/plugins/rate-limit.ts';
import { admin, createTestSandbox, registeredAgent, type TestSandbox } from '../helpers/sandbox.ts';

/**
 * The data API's tiers, each with a minute window and a day window. The real numbers are
 * checked at the real public limit; lowered ones (a day cap under the minute's) reach the day
 * window without waiting a day.
 */
let sandbox: TestSandbox;
beforeAll(async () => {
  sandbox = await createTestSandbox({
    rateLimit: true,
    dataTiers: {
      public: { perMinute: DATA_TIERS.public.perMinute, perDay: DATA_TIERS.public.perDay },
      authenticated: { perMinute: 10, perDay: 4 },
      node: { perMinute: 6, perDay: null },
    },
  });
});
afterAll(async () => {
  await sandbox.close();
});

const request = (remoteAddress: string, key?: string) =>
  sandbox.app.inject({
    url: '/v1/protocol/stats',
    remoteAddress,
    ...(key && { headers: { 'x-api-key': key } }),
  });

function expectLimited(
  response: { statusCode: number; headers: Record<string, unknown>; json(): unknown },
  window: 'minute' | 'day',
) {
  expect(response.statusCode).toBe(429);
  const body = response.json() as { error: { code: string; details: { window: string } } };
  expect(body.error.code).toBe('RATE_LIMITED');
  expect(body.error.details.window).toBe(window);
  const retryAfter = Number(response.headers['retry-after']);
  expect(retryAfter).toBeGreaterThan(0);
  expect(retryAfter).toBeLessThanOrEqual(window === 'minute' ? 60 : 86_400);
  if (window === 'day') expect(retryAfter).toBeGreaterThan(60);
}

describe('the data API’s rate tiers', () => {
  it('allows the public tier 60 requests a minute per IP, apart from Part A’s bucket', async () => {
    for (let i = 0; i < 60; i++) {
      const response = await request('10.1.0.1');
      expect(response.statusCode).toBe(200);
    }
    expectLimited(await request('10.1.0.1'), 'minute');
    // Unknown paths and bad input count too: one request, one count.
    expectLimited(
      await sandbox.app.inject({ url: '/v1/nope', remoteAddress: '10.1.0.1' }),
      'minute',
    );
    // Part A's public bucket is another one.
    const partA = await sandbox.app.inject({ url: '/api/v1/vaults', remoteAddress: '10.1.0.1' });
    expect(partA.statusCode).toBe(200);
    expect((await request('10.1.0.2')).statusCode).toBe(200);
  });

  it('caps an agent key by the day as well as by the minute', async () => {
    const agent = await registeredAgent(sandbox.app);
    for (let i = 0; i < 4; i++) {
      expect((await request('10.2.0.1', agent.apiKey)).statusCode).toBe(200);
    }
    // The day window (4) runs out before the minute's (10).
    expectLimited(await request('10.2.0.1', agent.apiKey), 'day');
    // Counted per agent, not per IP: another address with the same key is limited too.
    expectLimited(await request('10.2.0.9', agent.apiKey), 'day');
    expect((await request('10.2.0.1')).statusCode).toBe(200);
  });

  it('gives a node key its own tier, with no daily cap', async () => {
    const node = (
      await admin(sandbox.app, 'POST', '/sandbox/nodes', {
        name: 'Indexer node',
        operator_address: `0x${'cd'.repeat(20)}`,
      })
    ).json() as { node_key: string };
    for (let i = 0; i < 6; i++) {
      expect((await request('10.3.0.1', node.node_key)).statusCode).toBe(200);
    }
    expectLimited(await request('10.3.0.1', node.node_key), 'minute');
  });

  it('refuses a key that is neither an agent’s nor a node’s', async () => {
    const response = await request('10.4.0.1', 'agk_not-a-key');
    expect(response.statusCode).toBe(401);
    expect((response.json() as { error: { code: string } }).error.code).toBe('INVALID_API_KEY');
  });
});

describe('GraphQL counts against the same tiers', () => {
  const graphql = (remoteAddress: string, key?: string) =>
    sandbox.app.inject({
      method: 'POST',
      url: '/graphql',
      remoteAddress,
      payload: { query: '{ a: protocolStats { vaults } b: vaults { name } }' },
      ...(key && { headers: { 'x-api-key': key } }),
    });

  it('shares a caller’s window with /v1: one request (whatever it asks), one count', async () => {
    for (let i = 0; i < 30; i++) expect((await request('10.9.0.1')).statusCode).toBe(200);
    for (let i = 0; i < 30; i++) {
      const response = await graphql('10.9.0.1');
      expect(response.statusCode).toBe(200);
      expect(response.json().errors).toBeUndefined();
    }
    const limited = await graphql('10.9.0.1');
    expect(limited.statusCode).toBe(429);
    expect(Number(limited.headers['retry-after'])).toBeGreaterThan(0);
    const body = limited.json();
    expect(body.data).toBeNull();
    expect(body.errors[0].extensions.code).toBe('RATE_LIMITED');
    expect(body.errors[0].message).toMatch(/at most 60 requests a minute/);
    expectLimited(await request('10.9.0.1'), 'minute');
  });

  it('takes a key for its tier, and refuses a key that is none', async () => {
    const node = await admin(sandbox.app, 'POST', '/sandbox/nodes', {
      name: 'graph node',
      operator_address: '0x00000000000000000000000000000000000000cc',
    });
    const key = node.json().node_key as string;
    for (let i = 0; i < 6; i++) expect((await graphql('10.9.0.2', key)).statusCode).toBe(200);
    expect((await graphql('10.9.0.2', key)).json().errors[0].extensions.code).toBe('RATE_LIMITED');
    const forged = await graphql('10.9.0.3', 'agent_forged');
    expect(forged.statusCode).toBe(401);
    expect(forged.json().errors[0].extensions.code).toBe('UNAUTHENTICATED');
  });
});

describe('a GraphQL WebSocket counts in the tier of the key its connection_init carries', () => {
  /** Opens a socket, sends connection_init, and answers what came of it. */
  async function connectWith(url: string, payload: Record<string, unknown>) {
    const socket = new WebSocket(url, 'graphql-transport-ws');
    await new Promise((resolve) => socket.once('open', resolve));
    const outcome = new Promise<{ acknowledged: boolean; code?: number; reason?: string }>(
      (resolve) => {
        socket.once('message', (data) =>
          resolve({ acknowledged: JSON.parse(String(data)).type === 'connection_ack' }),
        );
        socket.once('close', (code, reason) =>
          resolve({ acknowledged: false, code, reason: String(reason) }),
        );
      },
    );
    socket.send(JSON.stringify({ type: 'connection_init', payload }));
    const result = await outcome;
    socket.terminate();
    return result;
  }

  it('a key is not held to its IP’s public limit, and a socket without one is (4290)', async () => {
    const address = await sandbox.app.listen({ host: '127.0.0.1', port: 0 });
    const url = `${address.replace(/^http/, 'ws')}/graphql`;
    const node = await admin(sandbox.app, 'POST', '/sandbox/nodes', {
      name: 'socket node',
      operator_address: '0x00000000000000000000000000000000000000dd',
    });
    const key = node.json().node_key as string;
    // Each connection_init counts one, in the public tier of 127.0.0.1 when it carries no key.
    for (let i = 0; i < 3; i++) expect((await connectWith(url, {})).acknowledged).toBe(true);
    for (let i = 0; i < DATA_TIERS.public.perMinute - 3; i++) {
      expect((await request('127.0.0.1')).statusCode).toBe(200);
    }
    expectLimited(await request('127.0.0.1'), 'minute');
    const publicSocket = await connectWith(url, {});
    expect(publicSocket.code).toBe(4290);
    expect(publicSocket.reason).toMatch(/^Rate limited: retry in \d+ s$/);
    expect(await connectWith(url, { apiKey: key })).toEqual({ acknowledged: true });
  });
});

describe('the shipped tiers', () => {
  it('are the spec’s numbers', () => {
    expect(DATA_TIERS).toEqual({
      public: { perMinute: 60, perDay: 10_000 },
      authenticated: { perMinute: 300, perDay: 100_000 },
      node: { perMinute: 1000, perDay: null },
    });
  });

  describe('in an app built as serve builds it (no tiers of its own)', () => {
    let shipped: TestSandbox;
    beforeAll(async () => {
      shipped = await createTestSandbox({ rateLimit: true });
    });
    afterAll(async () => {
      await shipped?.close();
    });
    const stats = (remoteAddress: string, key?: string) =>
      shipped.app.inject({
        url: '/v1/protocol/stats',
        remoteAddress,
        ...(key && { headers: { 'x-api-key': key } }),
      });
    /** Sends `count` requests, each answered 200, then one more, which is answered. */
    async function pastLimit(count: number, remoteAddress: string, key?: string) {
      for (let i = 0; i < count; i++) {
        const response = await stats(remoteAddress, key);
        if (response.statusCode !== 200) {
          throw new Error(`request ${i + 1} of ${count} answered ${response.statusCode}`);
        }
      }
      return stats(remoteAddress, key);
    }
    const limitOf = (response: { json(): unknown }) =>
      (response.json() as { error: { details: { window: string; limit: number } } }).error.details;

    it('holds an agent key to 300 a minute', async () => {
      const agent = await registeredAgent(shipped.app);
      const over = await pastLimit(300, '10.5.0.1', agent.apiKey);
      expectLimited(over, 'minute');
      expect(limitOf(over)).toMatchObject({ window: 'minute', limit: 300 });
    });

    it('holds a node key to 1,000 a minute', async () => {
      const node = (
        await admin(shipped.app, 'POST', '/sandbox/nodes', {
          name: 'Shipped node',
          operator_address: `0x${'ab'.repeat(20)}`,
        })
      ).json() as { node_key: string };
      const over = await pastLimit(1000, '10.5.0.2', node.node_key);
      expectLimited(over, 'minute');
      expect(limitOf(over)).toMatchObject({ window: 'minute', limit: 1000 });
    });
  });
});
