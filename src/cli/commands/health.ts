import { Command } from 'commander';
import { action } from '../action.ts';

export function healthCommand(): Command {
  return new Command('health')
    .summary('service health')
    .description('Show the service health: status, version, chain and RPC connection.')
    .addHelpText('after', '\nExample:\n  agentctl health --json')
    .action(
      action(async (context) => {
        const response = await (await context.client()).health();
        const out = await context.output();
        if (out.json) return out.raw(response.text);
        out.fields(response.data);
      }),
    );
}
