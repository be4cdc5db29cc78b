import { Command } from 'commander';
import { action } from '../action.ts';

export function proposalsCommand(): Command {
  return new Command('proposals')
    .summary('active governance proposals')
    .description(
      'List the governance proposals open for votes. The spec leaves their shape open, so every field is shown.',
    )
    .addHelpText('after', '\nExample:\n  agentctl proposals')
    .action(
      action(async (context) => {
        const response = await (await context.client()).proposals();
        const out = await context.output();
        if (out.json) return out.raw(response.text);
        out.generic(response.data);
      }),
    );
}
