import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  admin,
  createTestSandbox,
  newAccount,
  registeredAgent,
  type TestSandbox,
} from '../helpers/sandbox.ts';
import { adminInProcess, useSnapshot } from '../helpers/snapshot.ts';

// One sandbox for the file. A test that needs it as new (no API key at all, the clock at
// offset 0) restores it first; the others make their own agents and read nothing else.
let sandbox: TestSandbox;
beforeAll(async () => {
  sandbox = await createTestSandbox();
});
afterAll(async () => {
  await sandbox?.close();
});
const asNew = useSnapshot(
  adminInProcess(() => sandbox),
  'new',
);

const vote = (apiKey?: string, payload: object = { proposal_id: 1, support: 1 }) =>
  sandbox.app.inject({
    method: 'POST',
    url: '/api/v1/agent/governance/vote',
    headers: apiKey ? { 'x-api-key': apiKey } : {},
    payload,
  });

describe('API key authentication', () => {
  it('answers 503 on authenticated endpoints while no API key exists at all', async () => {
    await asNew.restore();
    const response = await sandbox.app.inject({
      url: '/api/v1/agent/wallet',
      headers: { 'x-api-key': 'agk_whatever' },
    });
    expect(response.statusCode).toBe(503);
    expect(response.json().error).toContain('no API keys');
  });

  it('answers 401 to a missing key and to an unknown key once keys exist', async () => {
    await registeredAgent(sandbox.app);
    const missing = await sandbox.app.inject({ url: '/api/v1/agent/wallet' });
    expect(missing.statusCode).toBe(401);
    expect(missing.json().error).toContain('X-API-Key');
    const unknown = await sandbox.app.inject({
      url: '/api/v1/agent/wallet',
      headers: { 'x-api-key': `agk_${'0'.repeat(64)}` },
    });
    expect(unknown.statusCode).toBe(401);
    expect(unknown.json()).toEqual({ error: 'invalid API key' });
  });

  it('authenticates before validating, so a bad body without a key is still 401', async () => {
    await registeredAgent(sandbox.app);
    const response = await sandbox.app.inject({
      method: 'POST',
      url: '/api/v1/agent/vault/deposit',
      payload: { vault_id: 'nope' },
    });
    expect(response.statusCode).toBe(401);
  });

  it('validates bodies of authenticated writes with the shared schemas', async () => {
    const { apiKey } = await registeredAgent(sandbox.app);
    const deposit = (payload: object) =>
      sandbox.app.inject({
        method: 'POST',
        url: '/api/v1/agent/vault/deposit',
        headers: { 'x-api-key': apiKey },
        payload,
      });
    const unknownVault = await deposit({ vault_id: 'nope', amount_usdc: 1 });
    expect(unknownVault.statusCode).toBe(400);
    expect(unknownVault.json().error).toContain('conservative, moderate, aggressive');
    const tooPrecise = await deposit({ vault_id: 'moderate', amount_usdc: 1.0000001 });
    expect(tooPrecise.statusCode).toBe(400);
    expect(tooPrecise.json().error).toContain('6 decimal places');
  });
});

describe('tiers', () => {
  it('starts agents at unverified and answers 403 to a vote below established', async () => {
    const { apiKey, body } = await registeredAgent(sandbox.app);
    expect(body.tier).toBe('unverified');
    const response = await vote(apiKey);
    expect(response.statusCode).toBe(403);
    expect(response.json().error).toBe(
      'this action needs tier established or higher; this agent is unverified',
    );
  });

  it.each([
    ['observer', 403],
    ['registered', 403],
    ['established', 404],
    ['core_contributor', 404],
  ])('answers a vote by a %s agent with %i', async (tier, status) => {
    const { apiKey, account } = await registeredAgent(sandbox.app);
    const set = await admin(sandbox.app, 'POST', '/sandbox/agents/tier', {
      wallet_address: account.address,
      tier,
    });
    expect(set.statusCode).toBe(200);
    expect(set.json()).toEqual({ wallet_address: account.address, tier });
    // 404: past auth, tier and validation, at a proposal that does not exist.
    expect((await vote(apiKey)).statusCode).toBe(status);
  });

  it('validates the vote body for an established agent', async () => {
    const { apiKey, account } = await registeredAgent(sandbox.app);
    await admin(sandbox.app, 'POST', '/sandbox/agents/tier', {
      wallet_address: account.address,
      tier: 'established',
    });
    const response = await vote(apiKey, { proposal_id: 1.5, support: 3 });
    expect(response.statusCode).toBe(400);
    expect(response.json().error).toContain('proposal_id: must be an integer');
    expect(response.json().error).toContain('support: must be 0 (against), 1 (for) or 2 (abstain)');
  });
});

describe('sandbox admin API', () => {
  it.each([
    ['GET', '/sandbox/info'],
    ['POST', '/sandbox/clock/advance'],
    ['POST', '/sandbox/agents/tier'],
    ['POST', '/sandbox/fund'],
    ['POST', '/sandbox/proposals'],
    ['POST', '/sandbox/strategies/status'],
    ['POST', '/sandbox/checkpoint'],
  ] as const)('answers 401 to %s %s without or with a wrong token', async (method, url) => {
    const none = await sandbox.app.inject({ method, url, payload: {} });
    expect(none.statusCode).toBe(401);
    expect(none.json().error).toContain('X-Admin-Token');
    const wrong = await sandbox.app.inject({
      method,
      url,
      headers: { 'x-admin-token': 'wrong' },
      payload: {},
    });
    expect(wrong.statusCode).toBe(401);
    expect(wrong.json()).toEqual({ error: 'invalid admin token' });
  });

  it('reports version, role, database, chain id, clock and state dir', async () => {
    await asNew.restore();
    const response = await admin(sandbox.app, 'GET', '/sandbox/info');
    expect(response.statusCode).toBe(200);
    const info = response.json();
    expect(info).toMatchObject({
      role: 'writer',
      database: 'sqlite',
      chain_id: 84532,
      state_dir: sandbox.dir,
      persistent: false,
      clock: { offset_seconds: 0 },
    });
    expect(info.version).toMatch(/^\d+\.\d+\.\d+/);
    expect(Math.abs(info.clock.now - Date.now() / 1000)).toBeLessThan(60);
  });

  it('moves the clock forward and keeps the offset', async () => {
    await asNew.restore();
    const before = (await admin(sandbox.app, 'GET', '/sandbox/info')).json().clock.now;
    const advanced = await admin(sandbox.app, 'POST', '/sandbox/clock/advance', { seconds: 3600 });
    expect(advanced.statusCode).toBe(200);
    expect(advanced.json().offset_seconds).toBe(3600);
    expect(advanced.json().now - before).toBeGreaterThanOrEqual(3600);
    await admin(sandbox.app, 'POST', '/sandbox/clock/advance', { seconds: 1 });
    expect(await sandbox.store.meta.get('clock_offset_seconds')).toBe('3601');
  });

  it.each([[{ seconds: 0 }], [{ seconds: -5 }], [{ seconds: 1.5 }], [{ seconds: '60' }], [{}]])(
    'refuses clock advance %j with 400',
    async (payload) => {
      const response = await admin(sandbox.app, 'POST', '/sandbox/clock/advance', payload);
      expect(response.statusCode).toBe(400);
      expect(response.json().error).toMatch(/^seconds: /);
    },
  );

  it('keeps the clock within a century of real time', async () => {
    await asNew.restore();
    const tenYears = 10 * 365 * 24 * 3600;
    for (let i = 0; i < 10; i++) {
      const step = await admin(sandbox.app, 'POST', '/sandbox/clock/advance', {
        seconds: tenYears,
      });
      expect(step.statusCode).toBe(200);
    }
    const beyond = await admin(sandbox.app, 'POST', '/sandbox/clock/advance', { seconds: 1 });
    expect(beyond.statusCode).toBe(400);
    expect(beyond.json().error).toContain('at most');
    // Dates still render.
    const { account } = await registeredAgent(sandbox.app);
    const lookup = await sandbox.app.inject({
      url: `/api/v1/agent/auth/lookup?wallet=${account.address}`,
    });
    expect(lookup.statusCode).toBe(200);
  });

  it('answers 404 when setting the tier of an unknown wallet, 400 for an unknown tier', async () => {
    const unknown = await admin(sandbox.app, 'POST', '/sandbox/agents/tier', {
      wallet_address: newAccount().address,
      tier: 'observer',
    });
    expect(unknown.statusCode).toBe(404);
    const badTier = await admin(sandbox.app, 'POST', '/sandbox/agents/tier', {
      wallet_address: newAccount().address,
      tier: 'king',
    });
    expect(badTier.statusCode).toBe(400);
    expect(badTier.json().error).toContain('tier');
  });
});
