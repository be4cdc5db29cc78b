import { Command } from 'commander';
import { action } from '../action.ts';
import type { Context } from '../context.ts';
import { amountWithRaw } from '../format.ts';
import { showRead } from '../read.ts';

/** `agentctl stats` takes no options of its own. */
export type StatsOptions = Record<string, never>;

export function statsCommand(): Command {
  return new Command('stats')
    .summary('aggregate agent statistics')
    .description('Show aggregate statistics: agents, strategies and total deposits.')
    .addHelpText('after', '\nExample:\n  agentctl stats --json')
    .action(action((context) => run({}, context)));
}

export async function run(_options: StatsOptions, context: Context): Promise<void> {
  const client = await context.client();
  const out = await context.output();
  await showRead(out, client.stats, [], (stats) =>
    out.fields({ ...stats, total_deposits_usdc: amountWithRaw(stats.total_deposits_usdc) }),
  );
}
