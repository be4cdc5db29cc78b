import { Command } from 'commander';
import { action } from '../action.ts';

export function statsCommand(): Command {
  return new Command('stats')
    .summary('aggregate agent statistics')
    .description('Show aggregate statistics: agents, strategies and total deposits.')
    .addHelpText('after', '\nExample:\n  agentctl stats --json')
    .action(
      action(async (context) => {
        const response = await (await context.client()).stats();
        const out = await context.output();
        if (out.json) return out.raw(response.text);
        out.fields(response.data);
      }),
    );
}
