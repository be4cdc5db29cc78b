import { Command } from 'commander';
import { PROFILE_KEYS, type ProfileKey } from '../../../config/keys.ts';
import { action } from '../../action.ts';
import { profileKey } from '../../args.ts';
import type { Context } from '../../context.ts';
import { CliError, EXIT } from '../../exit-codes.ts';

export interface ConfigGetOptions {
  key: ProfileKey;
}

export function configGetCommand(): Command {
  return new Command('get')
    .description('print one setting of the profile')
    .argument('<key>', PROFILE_KEYS.join(' | '), profileKey)
    .addHelpText('after', '\nExample:\n  agentctl config get base_url')
    .action(action((context, command) => run({ key: command.processedArgs[0] }, context)));
}

export async function run(options: ConfigGetOptions, context: Context): Promise<void> {
  const { key } = options;
  const value = (await context.profile())[key];
  const out = await context.output();
  if (out.json) return out.jsonValue({ profile: context.profileName, key, value: value ?? null });
  if (value === undefined) {
    throw new CliError(`${key} is not set in profile "${context.profileName}"`, EXIT.failure);
  }
  out.print(value);
}
