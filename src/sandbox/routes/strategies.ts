import type { Address, Hex } from 'viem';
import {
  IdempotentWriteHeaders,
  StrategyList,
  StrategySubmitRequest,
  StrategySubmitResult,
} from '../../api/schemas/index.ts';
import { deriveDna, type SubmittedStrategy, submitStrategy } from '../chain/strategies.ts';
import { indexedStrategiesOf, readPartA } from '../indexer/part-a-reads.ts';
import { callerOf } from '../plugins/auth.ts';
import { byAgent } from '../plugins/idempotency.ts';
import type { App, RouteDeps } from './types.ts';

export function registerStrategyRoutes(
  app: App,
  { clock, limits, auth, chain, index, keys }: RouteDeps,
): void {
  app.post(
    '/api/v1/agent/strategy/submit',
    {
      schema: {
        headers: IdempotentWriteHeaders,
        body: StrategySubmitRequest,
        response: { 200: StrategySubmitResult },
      },
      onRequest: [auth.authenticate, limits.writes],
    },
    keys.keyed(byAgent, async (request) => {
      const agent = callerOf(request);
      const { name, description, dna_string, ...risk } = request.body;
      const agentAddress = agent.agent_address as Address;
      const timestamp = clock.nowSeconds();
      const dna =
        (dna_string as Hex | undefined) ??
        ((sequence: bigint) =>
          deriveDna({ name, agentId: agent.agent_id, wallet: agentAddress, timestamp, sequence }));
      const answer = (submitted: SubmittedStrategy) => ({
        success: true,
        agent_address: agentAddress,
        strategy_name: name,
        strategy_id: submitted.strategyId,
        dna_string: submitted.dna,
        risk_params: risk,
        tx_hash: submitted.txHash,
        status: 'shadow',
        block_number: submitted.blockNumber,
        gas_used: submitted.gasUsed,
      });
      const submitted = await submitStrategy(
        chain,
        agent.wallet_index,
        { name, description, dna, risk },
        async (tx, made) => {
          await tx.agents.recordActivity(agent.agent_id, { strategies: 1 });
          await keys.answerOf(request).commit(tx, answer(made));
        },
      );
      return answer(submitted);
    }),
  );

  app.get(
    '/api/v1/agent/strategy/list',
    { schema: { response: { 200: StrategyList } }, onRequest: [limits.public, auth.authenticate] },
    async (request) => {
      const agentAddress = callerOf(request).agent_address as Address;
      const strategies = await readPartA(index.view, (sql) =>
        indexedStrategiesOf(sql, chain.deployment, agentAddress),
      );
      return { agent_address: agentAddress, strategies, total_count: strategies.length };
    },
  );
}
