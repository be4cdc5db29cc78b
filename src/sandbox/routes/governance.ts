import {
  IdempotentWriteHeaders,
  ProposalList,
  VoteRequest,
  VoteResult,
} from '../../api/schemas/index.ts';
import { activeProposals, type CastVote, castVote } from '../chain/governance.ts';
import { callerOf } from '../plugins/auth.ts';
import { byAgent } from '../plugins/idempotency.ts';
import type { App, RouteDeps } from './types.ts';

export function registerGovernanceRoutes(app: App, { limits, auth, chain, keys }: RouteDeps): void {
  app.get(
    '/api/v1/proposals',
    { schema: { response: { 200: ProposalList } }, onRequest: limits.public },
    async () => {
      const proposals = await activeProposals(chain);
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
