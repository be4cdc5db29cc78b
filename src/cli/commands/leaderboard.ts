import { Command, InvalidArgumentError } from 'commander';
import { LEADERBOARD_MAX_LIMIT } from '../../api/schemas/values.ts';
import { action } from '../action.ts';
import type { Context } from '../context.ts';
import { clip, wideOption } from '../format.ts';
import { showRead } from '../read.ts';

/** `agentctl leaderboard [--limit n]`: the service's default when no limit is given. */
export interface LeaderboardOptions {
  limit?: number | undefined;
  /** Agent names whole. */
  wide?: boolean | undefined;
}

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
    .addOption(wideOption())
    .addHelpText('after', '\nExample:\n  agentctl leaderboard --limit 10')
    .action(
      action((context, command) => {
        const { limit, wide } = command.opts<LeaderboardOptions>();
        return run({ limit, wide }, context);
      }),
    );
}

export async function run(options: LeaderboardOptions, context: Context): Promise<void> {
  const client = await context.client();
  const out = await context.output();
  await showRead(out, client.leaderboard, [options.limit], ({ agents }) =>
    out.table(
      ['#', 'agent', 'tier', 'score', 'strategies'],
      agents.map((agent, i) => [
        i + 1,
        // A name may have 100 characters: clipped to keep the table within 80 columns.
        options.wide ? agent.agent_name : clip(agent.agent_name, 24),
        agent.tier,
        options.wide ? agent.performance_score : Number(agent.performance_score.toFixed(4)),
        agent.strategies_submitted,
      ]),
    ),
  );
}
