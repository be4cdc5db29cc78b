import { Command } from 'commander';
import { PROFILE_KEYS, type ProfileKey } from '../../../config/keys.ts';
import { action } from '../../action.ts';
import { profileKey } from '../../args.ts';
import type { Context } from '../../context.ts';

export interface ConfigUnsetOptions {
  key: ProfileKey;
}

export function configUnsetCommand(): Command {
  return new Command('unset')
    .description('remove one setting from the profile')
    .argument('<key>', PROFILE_KEYS.join(' | '), profileKey)
    .addHelpText('after', '\nExample:\n  agentctl config unset api_key')
    .action(action((context, command) => run({ key: command.processedArgs[0] }, context)));
}

export async function run(options: ConfigUnsetOptions, context: Context): Promise<void> {
  await (await context.config()).unset(context.profileName, options.key);
  const out = await context.output();
  if (out.json)
    return out.jsonValue({ profile: context.profileName, key: options.key, value: null });
  out.info(`removed ${options.key} from profile "${context.profileName}"`);
}
