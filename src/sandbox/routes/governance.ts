import {
  IdempotentWriteHeaders,
  ProposalList,
  VoteRequest,
  VoteResult,
} from '../../api/schemas/index.ts';
import { type CastVote, castVote } from '../chain/governance.ts';
import { indexedActiveProposals, readPartA } from '../indexer/part-a-reads.ts';
import { callerOf } from '../plugins/auth.ts';
import { byAgent } from '../plugins/idempotency.ts';
import type { App, RouteDeps } from './types.ts';

export function registerGovernanceRoutes(
  app: App,
  { clock, limits, auth, chain, index, keys }: RouteDeps,
): void {
  app.get(
    '/api/v1/proposals',
    { schema: { response: { 200: ProposalList } }, onRequest: limits.public },
    async () => {
      // Open at the time the next block will carry: the index's last block's, or sandbox time
      // if later (after an idle spell no block has been mined for a while).
      const now = Math.max(clock.nowSeconds(), index.now());
      const proposals = await readPartA(index.view, (sql) => indexedActiveProposals(sql, now));
      return { proposals, total: proposals.length };
    },
  );

  app.post(
    '/api/v1/agent/governance/vote',
    {
      schema: { headers: IdempotentWriteHeaders, body: VoteRequest, response: { 200: VoteResult } },
      onRequest: [auth.authenticate, limits.writes, auth.requireTier('established')],
    },
    keys.keyed(byAgent, async (request) => {
      const agent = callerOf(request);
      const { proposal_id, support, reason } = request.body;
      const answer = (vote: CastVote) => ({
        success: true,
        agent_address: agent.agent_address,
        proposal_id,
        support,
        support_label: vote.supportLabel,
        reason,
        tx_hash: vote.txHash,
        status: 'confirmed',
        block_number: vote.blockNumber,
      });
      const vote = await castVote(
        chain,
        agent.wallet_index,
        { proposalId: proposal_id, support, reason },
        async (tx, cast) => {
          await tx.agents.recordActivity(agent.agent_id, { votes: 1 });
          await keys.answerOf(request).commit(tx, answer(cast));
        },
      );
      return answer(vote);
    }),
  );
}
