import { z } from 'zod';

/** Vote support values, as in OpenZeppelin's Governor. */
export const VOTE_SUPPORT = { against: 0, for: 1, abstain: 2 } as const;

export const VoteRequest = z.object({
  proposal_id: z
    .number({ error: 'must be an integer' })
    .int({ error: 'must be an integer' })
    .nonnegative({ error: 'must not be negative' })
    .max(Number.MAX_SAFE_INTEGER, { error: 'is too large' }),
  support: z.union([z.literal(0), z.literal(1), z.literal(2)], {
    error: 'must be 0 (against), 1 (for) or 2 (abstain)',
  }),
  reason: z.string().max(1000, { error: 'must be at most 1000 characters' }).default(''),
});
export type VoteRequest = z.input<typeof VoteRequest>;
