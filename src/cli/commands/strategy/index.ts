import { Command } from 'commander';
import { listCommand } from './list.ts';
import { submitCommand } from './submit.ts';

export function strategyCommand(): Command {
  return new Command('strategy')
    .summary('submit and list strategies')
    .description(
      "Submit DNA-encoded strategies to the registry from the agent's server-side wallet, and list them.",
    )
    .addHelpText(
      'after',
      '\nExamples:\n  agentctl strategy submit --file strategy.json --dry-run\n  agentctl strategy list',
    )
    .addCommand(submitCommand())
    .addCommand(listCommand());
}
