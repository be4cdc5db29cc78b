import type { LightMyRequestResponse } from 'fastify';
import { type Address, createPublicClient, http } from 'viem';
import type { Tier } from '../../src/api/schemas/index.ts';
import { admin, registeredAgent, type TestSandbox } from './sandbox.ts';

/**
 * A viem client of our own on the sandbox's RPC URL: tests check onchain effects with it,
 * independently of the sandbox's code.
 */
export function chainReader(sandbox: TestSandbox) {
  return createPublicClient({ transport: http(sandbox.chain.rpcUrl) });
}

/** A registered agent with its API key and its server-side wallet (`agent_address`). */
export async function chainAgent(sandbox: TestSandbox, tier?: Tier) {
  const agent = await registeredAgent(sandbox.app);
  if (tier) {
    const set = await admin(sandbox.app, 'POST', '/sandbox/agents/tier', {
      wallet_address: agent.account.address,
      tier,
    });
    if (set.statusCode !== 200) throw new Error(`tier failed: ${set.body}`);
  }
  const wallet = await call(sandbox, agent.apiKey, 'GET', '/api/v1/agent/wallet');
  if (wallet.statusCode !== 200) throw new Error(`wallet failed: ${wallet.body}`);
  return { ...agent, agentAddress: wallet.json().agent_address as Address };
}

/** An authenticated request. */
export function call(
  sandbox: TestSandbox,
  apiKey: string,
  method: 'GET' | 'POST',
  url: string,
  payload?: object,
): Promise<LightMyRequestResponse> {
  return sandbox.app.inject({
    method,
    url,
    headers: { 'x-api-key': apiKey },
    ...(payload ? { payload } : {}),
  });
}
