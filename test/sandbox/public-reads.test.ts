import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createTestSandbox, registeredAgent, type TestSandbox } from '../helpers/sandbox.ts';

let sandbox: TestSandbox;
beforeEach(async () => {
  sandbox = await createTestSandbox();
});
afterEach(async () => {
  await sandbox.close();
});

describe('GET /health', () => {
  it('reports Base Sepolia and no chain connection yet', async () => {
    const response = await sandbox.app.inject({ url: '/health' });
    expect(response.statusCode).toBe(200);
    expect(response.json()).toEqual({
      status: 'ok',
      version: expect.stringMatching(/^\d+\.\d+\.\d+/),
      chain_id: 84532,
      chain_name: 'Base Sepolia',
      rpc_connected: false,
    });
  });
});

describe('GET /api/v1/agents', () => {
  it('lists agents in ranking order with the spec fields and never a key', async () => {
    const first = await registeredAgent(sandbox.app, { agent_name: 'First' });
    await registeredAgent(sandbox.app, { agent_name: 'Second' });
    const response = await sandbox.app.inject({ url: '/api/v1/agents' });
    expect(response.statusCode).toBe(200);
    expect(response.json()).toEqual({
      agents: [
        { agent_name: 'First', tier: 'unverified', performance_score: 0, strategies_submitted: 0 },
        { agent_name: 'Second', tier: 'unverified', performance_score: 0, strategies_submitted: 0 },
      ],
      count: 2,
    });
    expect(response.body).not.toContain(first.apiKey);
    expect(response.body).not.toContain('api_key');
  });

  it('defaults limit to 50 and honours smaller limits', async () => {
    for (let i = 0; i < 3; i++) await registeredAgent(sandbox.app, { agent_name: `Agent ${i}` });
    const limited = await sandbox.app.inject({ url: '/api/v1/agents?limit=2' });
    expect(limited.json().count).toBe(2);
    const all = await sandbox.app.inject({ url: '/api/v1/agents?limit=100' });
    expect(all.json().count).toBe(3);
  });

  it.each(['0', '101', '-1', 'abc', '1.5', ''])('refuses limit=%s with 400', async (limit) => {
    const response = await sandbox.app.inject({ url: `/api/v1/agents?limit=${limit}` });
    expect(response.statusCode).toBe(400);
    expect(response.json().error).toMatch(/^limit: /);
  });
});

describe('GET /api/v1/agents/stats', () => {
  it('counts agents', async () => {
    const empty = await sandbox.app.inject({ url: '/api/v1/agents/stats' });
    expect(empty.json()).toEqual({
      total_agents: 0,
      active_agents: 0,
      strategies_submitted: 0,
      total_deposits_usdc: 0,
    });
    await registeredAgent(sandbox.app);
    await registeredAgent(sandbox.app);
    const two = await sandbox.app.inject({ url: '/api/v1/agents/stats' });
    expect(two.json()).toMatchObject({ total_agents: 2, active_agents: 2 });
  });
});
