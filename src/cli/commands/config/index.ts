import { Command } from 'commander';
import { PROFILE_KEYS } from '../../../config/keys.ts';
import { configGetCommand } from './get.ts';
import { configListCommand } from './list.ts';
import { configPathCommand } from './path.ts';
import { configSetCommand } from './set.ts';
import { configUnsetCommand } from './unset.ts';

export function configCommand(): Command {
  return new Command('config')
    .summary('read and change the profile settings')
    .description(
      `Profile settings: ${PROFILE_KEYS.join(', ')}. They apply to the profile chosen with --profile or AGENTCTL_PROFILE (default "default"). The profile's API key is sent only to its base_url and data_url, the service that issued it.`,
    )
    .addHelpText(
      'after',
      '\nExamples:\n  agentctl --profile live config set base_url https://agents.example.org\n  agentctl config list',
    )
    .addCommand(configGetCommand())
    .addCommand(configSetCommand())
    .addCommand(configUnsetCommand())
    .addCommand(configListCommand())
    .addCommand(configPathCommand());
}
