import type { LightMyRequestResponse } from 'fastify';
import { type Address, createPublicClient, http } from 'viem';
import { afterAll, beforeAll } from 'vitest';
import type { Tier } from '../../src/api/schemas/index.ts';
import { admin, createTestSandbox, registeredAgent, type TestSandbox } from './sandbox.ts';

/**
 * A viem client of our own on the sandbox's RPC URL: tests check onchain effects with it,
 * independently of the sandbox's code.
 */
export function chainReader(sandbox: TestSandbox) {
  return createPublicClient({ transport: http(sandbox.chain.rpcUrl) });
}

export type ChainReader = ReturnType<typeof chainReader>;

/**
 * One sandbox (app, SQLite, anvil) for a whole test file, with an independent chain
 * reader; `use` receives both once they are up.
 */
export function useChainSandbox(
  use: (sandbox: TestSandbox, reader: ChainReader) => void,
  options: Parameters<typeof createTestSandbox>[0] = {},
): void {
  let sandbox: TestSandbox | undefined;
  beforeAll(async () => {
    sandbox = await createTestSandbox(options);
    use(sandbox, chainReader(sandbox));
  });
  afterAll(async () => {
    await sandbox?.close();
  });
}

/**
 * A registered agent with its API key and its server-side wallet (`agent_address`); `fields`
 * go into its registration (e.g. an `agent_name` to find it by on the leaderboard).
 */
export async function chainAgent(
  sandbox: TestSandbox,
  tier?: Tier,
  fields: Record<string, unknown> = {},
) {
  const agent = await registeredAgent(sandbox.app, fields);
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
