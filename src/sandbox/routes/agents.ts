import { AgentStats, Leaderboard, LeaderboardQuery } from '../../api/schemas/index.ts';
import { totalStrategies } from '../chain/strategies.ts';
import { formatUsdc, totalDeposited } from '../chain/vaults.ts';
import type { App, RouteDeps } from './types.ts';

export function registerAgentRoutes(app: App, { store, limits, chain }: RouteDeps): void {
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
    async () => {
      const [deposited, strategies] = await Promise.all([
        totalDeposited(chain),
        totalStrategies(chain),
      ]);
      return {
        ...store.agents.totals(),
        strategies_submitted: Number(strategies),
        total_deposits_usdc: Number(formatUsdc(deposited)),
      };
    },
  );
}
