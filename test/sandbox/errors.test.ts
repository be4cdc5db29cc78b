import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createTestSandbox, registeredAgent, type TestSandbox } from '../helpers/sandbox.ts';

let sandbox: TestSandbox;
beforeEach(async () => {
  sandbox = await createTestSandbox();
});
afterEach(async () => {
  await sandbox.close();
});

const REGISTER = '/api/v1/agent/auth/register';

describe('error bodies', () => {
  it('answers malformed JSON with 400 and {error}', async () => {
    const response = await sandbox.app.inject({
      method: 'POST',
      url: REGISTER,
      headers: { 'content-type': 'application/json' },
      payload: '{"agent_name": ',
    });
    expect(response.statusCode).toBe(400);
    expect(Object.keys(response.json())).toEqual(['error']);
  });

  it.each(['text/plain', 'application/x-www-form-urlencoded', 'application/xml'])(
    'answers a %s body with 415 and {error}',
    async (contentType) => {
      const response = await sandbox.app.inject({
        method: 'POST',
        url: REGISTER,
        headers: { 'content-type': contentType },
        payload: 'agent_name=x',
      });
      expect(response.statusCode).toBe(415);
      expect(response.json().error).toContain('application/json');
    },
  );

  it('answers a body over 64 KiB with 413 and {error}', async () => {
    const response = await sandbox.app.inject({
      method: 'POST',
      url: REGISTER,
      headers: { 'content-type': 'application/json' },
      payload: JSON.stringify({ agent_name: 'x'.repeat(64 * 1024) }),
    });
    expect(response.statusCode).toBe(413);
    expect(response.json().error).toContain('64 KiB');
  });

  it('accepts a body just under 64 KiB far enough to validate it', async () => {
    const response = await sandbox.app.inject({
      method: 'POST',
      url: REGISTER,
      headers: { 'content-type': 'application/json' },
      payload: JSON.stringify({ agent_name: 'x'.repeat(60 * 1024) }),
    });
    expect(response.statusCode).toBe(400);
  });

  it('answers an empty JSON body with 400', async () => {
    const response = await sandbox.app.inject({
      method: 'POST',
      url: REGISTER,
      headers: { 'content-type': 'application/json' },
    });
    expect(response.statusCode).toBe(400);
    expect(response.json().error).toEqual(expect.any(String));
  });

  it.each([
    ['GET', '/api/v1/nothing'],
    ['DELETE', '/health'],
    ['POST', '/api/v1/agents'],
  ] as const)('answers %s %s with 404 and {error}', async (method, url) => {
    const response = await sandbox.app.inject({ method, url });
    expect(response.statusCode).toBe(404);
    expect(response.json()).toEqual({ error: `no such endpoint: ${method} ${url}` });
  });

  it('never leaks the internals of a failure', async () => {
    // A fault no request can cause on its own: a handler that throws.
    const faulty = await createTestSandbox({
      beforeReady: (app) =>
        app.get('/__explode', async () => {
          throw new Error('SQLITE_CORRUPT at /secret/path/sandbox.db');
        }),
    });
    try {
      const response = await faulty.app.inject({ url: '/__explode' });
      expect(response.statusCode).toBe(500);
      expect(response.json()).toEqual({ error: 'internal server error' });
    } finally {
      await faulty.close();
    }
  });
});

describe('a chain without the contracts', () => {
  // Part A's reads of vaults, positions and proposals come from the index (what the chain's
  // events said); the wallet's balances are read on the chain, from its token contracts.
  it('answers reads with 503 and says what is wrong, not 500', async () => {
    const { apiKey } = await registeredAgent(sandbox.app);
    const wallet = () =>
      sandbox.app.inject({
        method: 'GET',
        url: '/api/v1/agent/wallet',
        headers: { 'x-api-key': apiKey },
      });
    // Once the wallet is funded (with USDC among others), the token's code goes.
    expect((await wallet()).statusCode).toBe(200);
    const usdc = sandbox.chain.deployment.usdc;
    await fetch(sandbox.chain.rpcUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'anvil_setCode',
        params: [usdc, '0x'],
      }),
    });
    const response = await wallet();
    expect(response.statusCode).toBe(503);
    expect(response.json()).toEqual({ error: expect.stringContaining('contracts are missing') });
  });
});
