import { z } from 'zod';
import { LEADERBOARD_DEFAULT_LIMIT, LEADERBOARD_MAX_LIMIT } from './values.ts';

export const LeaderboardQuery = z.object({
  limit: z.coerce
    .number({ error: 'must be an integer' })
    .int({ error: 'must be an integer' })
    .min(1, { error: `must be 1 to ${LEADERBOARD_MAX_LIMIT}` })
    .max(LEADERBOARD_MAX_LIMIT, { error: `must be 1 to ${LEADERBOARD_MAX_LIMIT}` })
    .default(LEADERBOARD_DEFAULT_LIMIT),
});

export const LeaderboardEntry = z.object({
  agent_name: z.string(),
  tier: z.string(),
  performance_score: z.number(),
  strategies_submitted: z.number().int(),
});

export const Leaderboard = z.object({
  agents: z.array(LeaderboardEntry),
  count: z.number().int(),
});
export type Leaderboard = z.infer<typeof Leaderboard>;

export const AgentStats = z.object({
  total_agents: z.number().int(),
  active_agents: z.number().int(),
  strategies_submitted: z.number().int(),
  total_deposits_usdc: z.number(),
});
export type AgentStats = z.infer<typeof AgentStats>;
