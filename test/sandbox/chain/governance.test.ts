import { describe, expect, it } from 'vitest';
import { AgentGovernor } from '../../../src/sandbox/chain/contracts/artifacts.ts';
import { type ChainReader, call, chainAgent, useChainSandbox } from '../../helpers/chain.ts';
import { admin, type TestSandbox } from '../../helpers/sandbox.ts';

let sandbox: TestSandbox;
let reader: ChainReader;
useChainSandbox((started, chain) => {
  sandbox = started;
  reader = chain;
});

async function propose(title: string, description?: string) {
  const response = await admin(sandbox.app, 'POST', '/sandbox/proposals', {
    title,
    ...(description ? { description } : {}),
  });
  expect(response.statusCode).toBe(200);
  return response.json() as { proposal_id: number; tx_hash: string; vote_end: number };
}

const vote = (apiKey: string, payload: object) =>
  call(sandbox, apiKey, 'POST', '/api/v1/agent/governance/vote', payload);

describe('proposals', () => {
  it('opens proposals at once, with integer ids, and lists the active ones', async () => {
    const first = await propose('Raise the conservative APY', 'From 4 % to 5 %.');
    const second = await propose('Add a vault');
    expect(second.proposal_id).toBe(first.proposal_id + 1);
    const response = await sandbox.app.inject({ url: '/api/v1/proposals' });
    expect(response.statusCode).toBe(200);
    const body = response.json();
    expect(body.total).toBe(body.proposals.length);
    const listed = body.proposals.find(
      (p: { proposal_id: number }) => p.proposal_id === first.proposal_id,
    );
    expect(listed).toMatchObject({
      title: 'Raise the conservative APY',
      description: 'From 4 % to 5 %.',
      status: 'active',
      vote_end: first.vote_end,
      votes: { for: 0, against: 0, abstain: 0 },
    });
    expect(listed.vote_end - listed.vote_start).toBe(7 * 24 * 3600);
  });

  it('refuses a proposal without a title', async () => {
    const response = await admin(sandbox.app, 'POST', '/sandbox/proposals', { title: ' ' });
    expect(response.statusCode).toBe(400);
    expect(response.json().error).toContain('title');
  });
});

describe('POST /api/v1/agent/governance/vote', () => {
  it('casts the vote onchain with its reason, once', async () => {
    const { proposal_id } = await propose('Fund the research agents');
    const agent = await chainAgent(sandbox, 'established');
    const response = await vote(agent.apiKey, { proposal_id, support: 1, reason: 'good idea' });
    expect(response.statusCode).toBe(200);
    const body = response.json();
    expect(body).toMatchObject({
      success: true,
      agent_address: agent.agentAddress,
      proposal_id,
      support: 1,
      support_label: 'for',
      reason: 'good idea',
      status: 'confirmed',
    });
    const receipt = await reader.getTransactionReceipt({ hash: body.tx_hash });
    expect(receipt.status).toBe('success');
    expect(
      await reader.readContract({
        address: sandbox.chain.deployment.governor,
        abi: AgentGovernor.abi,
        functionName: 'hasVoted',
        args: [BigInt(proposal_id), agent.agentAddress],
      }),
    ).toBe(true);
    const listed = (await sandbox.app.inject({ url: '/api/v1/proposals' }))
      .json()
      .proposals.find((p: { proposal_id: number }) => p.proposal_id === proposal_id);
    expect(listed.votes).toEqual({ for: 1, against: 0, abstain: 0 });

    const again = await vote(agent.apiKey, { proposal_id, support: 0 });
    expect(again.statusCode).toBe(409);
    expect(again.json().error).toBe(`this agent has already voted on proposal ${proposal_id}`);
  });

  it('refuses concurrent double votes: exactly one lands', async () => {
    const { proposal_id } = await propose('Concurrent');
    const agent = await chainAgent(sandbox, 'established');
    const results = await Promise.all(
      [0, 1, 2].map((support) => vote(agent.apiKey, { proposal_id, support })),
    );
    expect(results.map((r) => r.statusCode).sort()).toEqual([200, 409, 409]);
  });

  it('answers 404 for an unknown proposal and 409 once voting has ended', async () => {
    const agent = await chainAgent(sandbox, 'established');
    const unknown = await vote(agent.apiKey, { proposal_id: 999_999, support: 1 });
    expect(unknown.statusCode).toBe(404);
    expect(unknown.json()).toEqual({ error: 'no proposal 999999' });

    const { proposal_id } = await propose('Short lived');
    await admin(sandbox.app, 'POST', '/sandbox/clock/advance', { seconds: 7 * 24 * 3600 + 1 });
    const late = await vote(agent.apiKey, { proposal_id, support: 1 });
    expect(late.statusCode).toBe(409);
    expect(late.json().error).toBe(`voting on proposal ${proposal_id} has ended`);
    const active = (await sandbox.app.inject({ url: '/api/v1/proposals' })).json();
    expect(active.proposals.map((p: { proposal_id: number }) => p.proposal_id)).not.toContain(
      proposal_id,
    );
  });

  it.each([
    [{ support: 1 }, 'proposal_id: is required'],
    [{ proposal_id: 1.5, support: 1 }, 'proposal_id: must be an integer'],
    [{ proposal_id: '1', support: 1 }, 'proposal_id: must be an integer'],
    [{ proposal_id: 1, support: 3 }, 'support: must be 0 (against), 1 (for) or 2 (abstain)'],
    [{ proposal_id: 1 }, 'support: is required'],
  ])('refuses %j with 400', async (payload, message) => {
    const agent = await chainAgent(sandbox, 'established');
    const response = await vote(agent.apiKey, payload);
    expect(response.statusCode).toBe(400);
    expect(response.json().error).toContain(message);
  });

  it('counts votes in the performance score', async () => {
    const { proposal_id } = await propose('Score me');
    const agent = await chainAgent(sandbox, 'core_contributor');
    expect((await vote(agent.apiKey, { proposal_id, support: 2 })).statusCode).toBe(200);
    const lookup = await sandbox.app.inject({
      url: `/api/v1/agent/auth/lookup?wallet=${agent.account.address}`,
    });
    expect(lookup.json().performance_score).toBe(5);
  });
});
