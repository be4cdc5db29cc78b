import { Command } from 'commander';
import { DEFAULT_BASE_URL, PROFILE_KEYS, type ProfileKey } from '../../../config/keys.ts';
import type { Profile } from '../../../config/profiles.ts';
import { action } from '../../action.ts';
import { checkAddress, profileKey } from '../../args.ts';
import { type Context, sameService } from '../../context.ts';
import { CliError, EXIT } from '../../exit-codes.ts';
import { maskedSetting } from '../../format.ts';

export interface ConfigSetOptions {
  key: ProfileKey;
  value: string;
  /** Replace an API key the profile already holds. */
  force?: boolean;
}

export function configSetCommand(): Command {
  return new Command('set')
    .description('change one setting of the profile')
    .argument('<key>', PROFILE_KEYS.join(' | '), profileKey)
    .argument('<value>', 'the new value')
    .option('--force', 'replace an API key the profile already holds')
    .addHelpText(
      'after',
      "\nAn api_key is bound to the profile's base_url (given with --base-url or\nAGENTCTL_BASE_URL, it becomes the profile's): it is sent only there and to the\nprofile's data_url.\n\nExamples:\n  agentctl config set base_url https://agents.example.org\n  agentctl --profile ci --base-url https://agents.example.org \\\n    config set api_key agk_…",
    )
    .action(
      action((context, command) => {
        const [key, value] = command.processedArgs as [ProfileKey, string];
        return run({ key, value, force: command.opts<{ force?: boolean }>().force }, context);
      }),
    );
}

export async function run(options: ConfigSetOptions, context: Context): Promise<void> {
  const { key } = options;
  const value = await validate(key, options.value);
  const config = await context.config();
  const profile = config.get(context.profileName);
  const held = profile.api_key;
  if (key === 'api_key' && held && held !== value && !options.force) {
    // It may be the only copy: the service shows a key once.
    throw new CliError(
      `profile "${context.profileName}" already holds an API key (${maskedSetting('api_key', held)}); pass --force to replace it, or use another --profile`,
      EXIT.usage,
    );
  }
  const changes: Profile = { [key]: value };
  const home = profile.base_url ?? DEFAULT_BASE_URL;
  // A key belongs to one service: the one named for this command, which the profile keeps.
  const named = context.globals.baseUrl ?? nonEmpty(context.env.AGENTCTL_BASE_URL);
  if (key === 'api_key' && named !== undefined && !sameService(named, home)) {
    changes.base_url = named;
  }
  await config.set(context.profileName, changes);
  const out = await context.output();
  if (out.json) {
    return out.jsonValue({
      profile: context.profileName,
      key,
      value: maskedSetting(key, value),
      ...(changes.base_url !== undefined && { base_url: changes.base_url }),
    });
  }
  out.info(`set ${key} in profile "${context.profileName}"`);
  if (key === 'api_key') {
    out.info(
      `the key is sent only to ${changes.base_url ?? home}${profile.data_url ? ` and ${profile.data_url}` : ''} (the profile's base_url${profile.data_url ? ' and data_url' : ''})`,
    );
  }
  if (key === 'base_url' && held && !sameService(value, home)) {
    out.info(`the profile's API key now goes to ${value} (it went to ${home})`);
  }
}

const nonEmpty = (value: string | undefined) => (value === '' ? undefined : value);

async function validate(key: ProfileKey, value: string): Promise<string> {
  if ((key === 'base_url' || key === 'data_url') && !/^https?:\/\/[^\s/]+/.test(value)) {
    throw new CliError(
      `${key} must be an http(s) URL, for example http://127.0.0.1:8787`,
      EXIT.usage,
    );
  }
  if (key === 'wallet_address') await checkAddress('wallet_address', value);
  if (key === 'api_key') checkApiKey(value);
  if (value.trim() === '') throw new CliError(`${key} must not be empty`, EXIT.usage);
  return value;
}

/**
 * An API key as services issue them: the sandbox's are `agk_` and 64 hex digits; any key is
 * one token of printable ASCII. A quote, a space or a cut-off paste is caught here, before it
 * replaces the only copy of a key.
 */
function checkApiKey(value: string): void {
  const fail = (why: string) => {
    throw new CliError(`api_key ${why}; paste the whole key as the service printed it`, EXIT.usage);
  };
  if (!/^[\x21-\x7e]+$/.test(value))
    fail('must be one token of printable ASCII (no spaces or quotes)');
  if (/["'`]/.test(value)) fail('holds a quote');
  if (value.startsWith('agk_') && !/^agk_[0-9a-f]{64}$/.test(value)) {
    fail(
      `looks cut short or mistyped: agk_ keys are agk_ and 64 hex digits (this one has ${value.length - 4} characters after agk_)`,
    );
  }
  if (value.length < 16) fail(`is too short to be a key (${value.length} characters)`);
}
