import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startAnvil } from '../../src/sandbox/chain/anvil.ts';
import { createRpcClient } from '../../src/sandbox/chain/rpc.ts';
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
  // Every read of Part A comes from the index (what the chain's events said), which keeps what
  // it knows when a contract's code goes; writes still call the contracts. On the sandbox's
  // own chain a contract gone is repaired (the chain is restored from its log); on a node of
  // its own (serve --rpc-url, reset under the sandbox) the write is answered 503 with what is
  // wrong, not 500.
  it('answers a write with 503 and says what is wrong, not 500', async () => {
    const nodeDir = mkdtempSync(join(tmpdir(), 'agentctl-errors-node-'));
    const node = await startAnvil({ stateDir: nodeDir, mining: 'auto' });
    let remote: TestSandbox | undefined;
    try {
      remote = await createTestSandbox({ rpcUrl: node.rpcUrl });
      const { apiKey } = await registeredAgent(remote.app);
      const deposit = () =>
        (remote as TestSandbox).app.inject({
          method: 'POST',
          url: '/api/v1/agent/vault/deposit',
          headers: { 'x-api-key': apiKey },
          payload: { vault_id: 'moderate', amount_usdc: 10 },
        });
      // Once the agent is funded, the vault's code goes.
      expect(
        (await remote.app.inject({ url: '/api/v1/agent/wallet', headers: { 'x-api-key': apiKey } }))
          .statusCode,
      ).toBe(200);
      await createRpcClient(node.rpcUrl).call('anvil_setCode', [
        remote.chain.deployment.vaults.moderate,
        '0x',
      ]);
      const response = await deposit();
      expect(response.json()).toEqual({ error: expect.stringContaining('contracts are missing') });
      expect(response.statusCode).toBe(503);
    } finally {
      await remote?.close();
      await node.stop();
      rmSync(nodeDir, { recursive: true, force: true });
    }
  });
});
