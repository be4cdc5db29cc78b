import { z } from 'zod';
import { boundedInt, requiredOr, textUpTo } from './common.ts';

export const VoteRequest = z.object({
  proposal_id: boundedInt(0, Number.MAX_SAFE_INTEGER, {
    below: 'must not be negative',
    above: 'is too large',
  }),
  support: z.union([z.literal(0), z.literal(1), z.literal(2)], {
    error: requiredOr('must be 0 (against), 1 (for) or 2 (abstain)'),
  }),
  reason: textUpTo(1000).default(''),
});
export type VoteRequest = z.input<typeof VoteRequest>;

/** A governance proposal (a shape the spec leaves open; documented in the README). */
export const Proposal = z.object({
  proposal_id: z.number().int(),
  title: z.string(),
  description: z.string(),
  proposer: z.string(),
  status: z.string(),
  vote_start: z.number().int(),
  vote_end: z.number().int(),
  votes: z.object({ for: z.number().int(), against: z.number().int(), abstain: z.number().int() }),
});
export const ProposalList = z.object({ proposals: z.array(Proposal), total: z.number().int() });

export const VoteResult = z.object({
  success: z.boolean(),
  agent_address: z.string(),
  proposal_id: z.number().int(),
  support: z.number().int(),
  support_label: z.string(),
  reason: z.string(),
  tx_hash: z.string(),
  status: z.string(),
  block_number: z.number().int(),
});
