import type { InjectOptions } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { admin, createTestSandbox, type TestSandbox } from '../helpers/sandbox.ts';

/**
 * Every answer of the sandbox carries its clock in X-Sandbox-Time (Unix seconds), errors and
 * unknown routes included: the command line computes its relative hints from it.
 */

let sandbox: TestSandbox;
beforeAll(async () => {
  sandbox = await createTestSandbox();
});
afterAll(async () => {
  await sandbox.close();
});

/** The header as a number, checked to be whole seconds. */
function sandboxTime(headers: Record<string, unknown>): number {
  const value = headers['x-sandbox-time'];
  expect(value, 'x-sandbox-time').toMatch(/^\d+$/);
  return Number(value);
}

describe('X-Sandbox-Time', () => {
  it.each([
    ['a read', { method: 'GET', url: '/health' }, 200],
    ['an unknown route', { method: 'GET', url: '/no/such/route' }, 404],
    [
      'an authenticated route before any key exists',
      { method: 'GET', url: '/api/v1/agent/wallet' },
      503,
    ],
    [
      'malformed JSON',
      {
        method: 'POST',
        url: '/api/v1/agent/auth/register',
        headers: { 'content-type': 'application/json' },
        payload: '{"agent_name": ',
      },
      400,
    ],
    [
      'a body over the limit',
      {
        method: 'POST',
        url: '/api/v1/agent/auth/register',
        headers: { 'content-type': 'application/json' },
        payload: JSON.stringify({ agent_name: 'x'.repeat(64 * 1024) }),
      },
      413,
    ],
    [
      'an unsupported media type',
      {
        method: 'POST',
        url: '/api/v1/agent/auth/register',
        headers: { 'content-type': 'text/plain' },
        payload: 'x',
      },
      415,
    ],
    ['the admin API without a token', { method: 'GET', url: '/sandbox/info' }, 401],
    ['a data API 404', { method: 'GET', url: `/v1/vaults/0x${'ab'.repeat(20)}` }, 404],
    [
      'a GraphQL query',
      {
        method: 'POST',
        url: '/graphql',
        headers: { 'content-type': 'application/json' },
        payload: JSON.stringify({ query: '{ vaults { name } }' }),
      },
      200,
    ],
  ] as const)('is on %s', async (_what, request, status) => {
    const before = sandbox.clock.nowSeconds();
    const response = await sandbox.app.inject(request as InjectOptions);
    const after = sandbox.clock.nowSeconds();
    expect(response.statusCode).toBe(status);
    const stamped = sandboxTime(response.headers);
    expect(stamped).toBeGreaterThanOrEqual(before);
    expect(stamped).toBeLessThanOrEqual(after);
  });

  it('moves with the sandbox clock', async () => {
    const before = sandboxTime((await sandbox.app.inject({ url: '/health' })).headers);
    const advanced = await admin(sandbox.app, 'POST', '/sandbox/clock/advance', {
      seconds: 86_400,
    });
    expect(advanced.statusCode).toBe(200);
    expect(sandboxTime(advanced.headers)).toBeGreaterThanOrEqual(before + 86_400);
    const after = sandboxTime((await sandbox.app.inject({ url: '/no/such/route' })).headers);
    expect(after).toBeGreaterThanOrEqual(before + 86_400);
  });

  it("the GraphQL Vault's updatedAt is the last indexed block's time, as protocolStats's", async () => {
    const response = await sandbox.app.inject({
      method: 'POST',
      url: '/graphql',
      headers: { 'content-type': 'application/json' },
      payload: JSON.stringify({ query: '{ vaults { updatedAt } protocolStats { updatedAt } }' }),
    });
    const { data } = response.json();
    expect(data.protocolStats.updatedAt).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
    for (const vault of data.vaults) expect(vault.updatedAt).toBe(data.protocolStats.updatedAt);
  });
});
