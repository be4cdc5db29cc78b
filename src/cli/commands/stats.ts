import { Command } from 'commander';
import { action } from '../action.ts';
import { amountWithRaw } from '../format.ts';

export function statsCommand(): Command {
  return new Command('stats')
    .summary('aggregate agent statistics')
    .description('Show aggregate statistics: agents, strategies and total deposits.')
    .addHelpText('after', '\nExample:\n  agentctl stats --json')
    .action(
      action(async (context) => {
        const client = await context.client();
        const out = await context.output();
        if (out.json) return out.raw((await client.stats.asReceived()).text);
        const response = await client.stats();
        const stats = response.data;
        out.fields({ ...stats, total_deposits_usdc: amountWithRaw(stats.total_deposits_usdc) });
      }),
    );
}
