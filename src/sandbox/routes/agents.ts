import { AgentStats, Leaderboard, LeaderboardQuery } from '../../api/schemas/index.ts';
import { formatUsdc } from '../chain/vaults.ts';
import {
  indexedTotalDeposited,
  indexedTotalStrategies,
  readPartA,
} from '../indexer/part-a-reads.ts';
import { createResponseCache } from './response-cache.ts';
import type { App, RouteDeps } from './types.ts';

export function registerAgentRoutes(app: App, { store, limits, index }: RouteDeps): void {
  // Both answers are served pre-serialised until a write changes them: the leaderboard
  // until an agent row changes, the stats until then or until the index commits.
  const leaderboards = createResponseCache<number>();
  app.get(
    '/api/v1/agents',
    {
      schema: { querystring: LeaderboardQuery, response: { 200: Leaderboard } },
      onRequest: limits.public,
    },
    async (request, reply) =>
      leaderboards.send(reply, request.query.limit, store.agents.version, async () => {
        const agents = await store.agents.leaderboard(request.query.limit);
        return Leaderboard.parse({ agents, count: agents.length });
      }),
  );

  const stats = createResponseCache<'stats'>();
  app.get(
    '/api/v1/agents/stats',
    { schema: { response: { 200: AgentStats } }, onRequest: limits.public },
    async (_request, reply) =>
      stats.send(
        reply,
        'stats',
        () => `${store.agents.version()}:${index.version()}`,
        async () => {
          const [deposited, strategies] = await readPartA(index.view, (sql) =>
            Promise.all([indexedTotalDeposited(sql), indexedTotalStrategies(sql)]),
          );
          return AgentStats.parse({
            ...(await store.agents.totals()),
            strategies_submitted: Number(strategies),
            total_deposits_usdc: Number(formatUsdc(deposited)),
          });
        },
      ),
  );
}
