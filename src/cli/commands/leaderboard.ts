import { Command, InvalidArgumentError } from 'commander';
import { LEADERBOARD_MAX_LIMIT } from '../../api/schemas/values.ts';
import { action } from '../action.ts';

function parseLimit(value: string): number {
  const limit = Number(value);
  if (!/^\d+$/.test(value) || limit < 1 || limit > LEADERBOARD_MAX_LIMIT) {
    throw new InvalidArgumentError(`must be an integer from 1 to ${LEADERBOARD_MAX_LIMIT}`);
  }
  return limit;
}

export function leaderboardCommand(): Command {
  return new Command('leaderboard')
    .summary('agents ranked by performance score')
    .description('List agents ranked by performance score.')
    .option(
      '--limit <n>',
      `how many (1 to ${LEADERBOARD_MAX_LIMIT}; the service defaults to 50)`,
      parseLimit,
    )
    .addHelpText('after', '\nExample:\n  agentctl leaderboard --limit 10')
    .action(
      action(async (context, command) => {
        const { limit } = command.opts<{ limit?: number }>();
        const client = await context.client();
        const out = await context.output();
        if (out.json) return out.raw((await client.leaderboard.asReceived(limit)).text);
        const response = await client.leaderboard(limit);
        out.table(
          ['#', 'agent', 'tier', 'score', 'strategies'],
          response.data.agents.map((agent, i) => [
            i + 1,
            agent.agent_name,
            agent.tier,
            agent.performance_score,
            agent.strategies_submitted,
          ]),
        );
      }),
    );
}
