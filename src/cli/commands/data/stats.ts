import { Command } from 'commander';
import { action } from '../../action.ts';
import type { Context } from '../../context.ts';
import { showRead } from '../../read.ts';
import { timeText, usdc } from './shared.ts';

/** `agentctl data stats` takes no options of its own. */
export type DataStatsOptions = Record<string, never>;

export function statsCommand(): Command {
  return new Command('stats')
    .description('protocol totals: TVL, strategies, agents, users, volume')
    .addHelpText('after', '\nExample:\n  agentctl data stats')
    .action(action((context) => run({}, context)));
}

export async function run(_options: DataStatsOptions, context: Context): Promise<void> {
  const client = await context.dataClient();
  const out = await context.output();
  await showRead(out, client.data.stats, [], (stats) =>
    out.fields({
      'total tvl': usdc(stats.totalTvl),
      vaults: stats.vaults,
      strategies: `${stats.strategies} (${stats.liveStrategies} live)`,
      agents: stats.agents,
      users: stats.users,
      transactions: stats.transactions,
      'volume 24h': usdc(stats.volume24h),
      block: stats.blockNumber,
      'updated at': timeText(stats.updatedAt, context.nowMs()),
    }),
  );
}
