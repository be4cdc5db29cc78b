import { describe, expect, it } from 'vitest';
import { ConfigurableVault } from '../../../src/sandbox/chain/contracts/artifacts.ts';
import { type ChainReader, call, chainAgent, useChainSandbox } from '../../helpers/chain.ts';
import { admin, type TestSandbox } from '../../helpers/sandbox.ts';

/**
 * The ERC-7540 fulfiller follows the agents' own requests apart from the rest, and looks
 * through newly indexed transactions a bounded number at a time. Past both bounds (here one
 * followed request, one transaction per look), nothing is lost: every request is still
 * fulfilled, in time order with the others, and every agent's is claimed.
 */
let sandbox: TestSandbox;
let reader: ChainReader;
useChainSandbox(
  (started, chainReader) => {
    sandbox = started;
    reader = chainReader;
  },
  { fulfilment: { maxFollowed: 1, scanPerLook: 1 } },
);

async function until(condition: () => Promise<boolean>): Promise<void> {
  while (!(await condition())) await new Promise((resolve) => setTimeout(resolve, 50));
}

describe('the fulfiller past its bounds', () => {
  it('still fulfils every request and claims every agent’s', async () => {
    const vault = sandbox.chain.deployment.vaults.configurable;
    const read = (
      functionName: 'balanceOf' | 'maxDeposit' | 'pendingDepositAssets',
      who: `0x${string}`,
    ) =>
      reader.readContract({
        address: vault,
        abi: ConfigurableVault.abi,
        functionName,
        args: [who],
      });
    const delay = await admin(sandbox.app, 'POST', '/sandbox/vaults/fulfillment-delay', {
      vault_id: 'configurable',
      seconds: 3600,
    });
    expect(delay.statusCode, delay.body).toBe(200);
    const agents = [await chainAgent(sandbox), await chainAgent(sandbox)];
    for (const agent of agents) {
      for (const amount of [1, 2]) {
        const deposit = await call(sandbox, agent.apiKey, 'POST', '/api/v1/agent/vault/deposit', {
          vault_id: 'configurable',
          amount_usdc: amount,
        });
        expect(deposit.statusCode, deposit.body).toBe(200);
        expect(deposit.json().status).toBe('pending');
      }
    }
    const advanced = await admin(sandbox.app, 'POST', '/sandbox/clock/advance', { seconds: 3600 });
    expect(advanced.statusCode, advanced.body).toBe(200);
    for (const agent of agents) {
      // Nothing pending, nothing left to claim, and the shares in the agent's wallet.
      await until(
        async () =>
          (await read('pendingDepositAssets', agent.agentAddress)) === 0n &&
          (await read('maxDeposit', agent.agentAddress)) === 0n,
      );
      expect(await read('balanceOf', agent.agentAddress)).toBeGreaterThan(0n);
    }
  });
});
