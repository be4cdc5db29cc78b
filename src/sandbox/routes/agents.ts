import { AgentStats, Leaderboard, LeaderboardQuery } from '../../api/schemas/index.ts';
import type { App, RouteDeps } from './types.ts';

export function registerAgentRoutes(app: App, { store, limits }: RouteDeps): void {
  app.get(
    '/api/v1/agents',
    {
      schema: { querystring: LeaderboardQuery, response: { 200: Leaderboard } },
      onRequest: limits.public,
    },
    async (request) => {
      const agents = store.agents.leaderboard(request.query.limit);
      return { agents, count: agents.length };
    },
  );

  app.get(
    '/api/v1/agents/stats',
    { schema: { response: { 200: AgentStats } }, onRequest: limits.public },
    async () => ({
      ...store.agents.totals(),
      // Deposits happen onchain; they are counted once the sandbox chain exists.
      total_deposits_usdc: 0,
    }),
  );
}
