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
  it('reports Base Sepolia and a live connection to the chain', async () => {
    const response = await sandbox.app.inject({ url: '/health' });
    expect(response.statusCode).toBe(200);
    expect(response.json()).toEqual({
      status: 'ok',
      version: expect.stringMatching(/^\d+\.\d+\.\d+/),
      chain_id: 84532,
      chain_name: 'Base Sepolia',
      rpc_connected: true,
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

  it('defaults limit to 50 and honours any limit up to 100', async () => {
    // Straight into the store: 120 signed registrations would only slow the test down.
    for (let i = 0; i < 120; i++) {
      await sandbox.store.agents.insert(
        {
          agent_id: `agent-${i}`,
          wallet_address: `0x${i.toString(16).padStart(40, '0')}`,
          wallet_key: `0x${i.toString(16).padStart(40, '0')}`,
          agent_name: `Agent ${i}`,
          agent_type: 'custom',
          description: null,
          operator_address: '0x000000000000000000000000000000000000dEaD',
          operator_email: null,
          operator_name: null,
          framework: null,
          repo_url: null,
          tier: 'unverified',
          created_at: i,
          wallet_index: 100_000 + i,
          agent_address: `0x${(100_000 + i).toString(16).padStart(40, '0')}`,
        },
        { hash: `hash-${i}`, prefix: 'agk_test' },
      );
    }
    const byDefault = await sandbox.app.inject({ url: '/api/v1/agents' });
    expect(byDefault.json().count).toBe(50);
    expect(byDefault.json().agents[0].agent_name).toBe('Agent 0');
    expect((await sandbox.app.inject({ url: '/api/v1/agents?limit=2' })).json().count).toBe(2);
    expect((await sandbox.app.inject({ url: '/api/v1/agents?limit=100' })).json().count).toBe(100);
  });

  it.each(['0', '101', '-1', 'abc', '1.5'])('refuses limit=%s with 400', async (limit) => {
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
