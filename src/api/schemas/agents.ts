import { z } from 'zod';
import { queryInt } from './common.ts';
import { LEADERBOARD_DEFAULT_LIMIT, LEADERBOARD_MAX_LIMIT } from './values.ts';

export const LeaderboardQuery = z.object({
  limit: queryInt(1, LEADERBOARD_MAX_LIMIT, LEADERBOARD_DEFAULT_LIMIT),
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
