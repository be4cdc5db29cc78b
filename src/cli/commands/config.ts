import { Command, InvalidArgumentError } from 'commander';
import { PROFILE_KEYS, type ProfileKey } from '../../config/keys.ts';
import { action } from '../action.ts';
import { checkAddress } from '../args.ts';
import { CliError, EXIT } from '../exit-codes.ts';

const KEYS: readonly ProfileKey[] = PROFILE_KEYS;

function parseKey(value: string): ProfileKey {
  if (!(KEYS as readonly string[]).includes(value)) {
    throw new InvalidArgumentError(`must be one of ${KEYS.join(', ')}`);
  }
  return value as ProfileKey;
}

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

/** The first value that is set, with where it came from; "not set" when none is. */
function pick(candidates: Array<[string | undefined, string]>): {
  value: string | undefined;
  source: string;
} {
  const found = candidates.find(([value]) => value !== undefined);
  return found ? { value: found[0], source: found[1] } : { value: undefined, source: 'not set' };
}

/** API keys are shown by their prefix only, except by an explicit `config get api_key`. */
function masked(key: ProfileKey, value: string | undefined): string | undefined {
  return key === 'api_key' && value ? `${value.slice(0, 12)}…` : value;
}

export function configCommand(): Command {
  const config = new Command('config')
    .summary('read and change the profile settings')
    .description(
      `Profile settings: ${KEYS.join(', ')}. They apply to the profile chosen with --profile or AGENTCTL_PROFILE (default "default").`,
    )
    .addHelpText(
      'after',
      '\nExamples:\n  agentctl --profile live config set base_url https://agents.example.org\n  agentctl config list',
    );
  config
    .command('get')
    .description('print one setting of the profile')
    .argument('<key>', KEYS.join(' | '), parseKey)
    .addHelpText('after', '\nExample:\n  agentctl config get base_url')
    .action(
      action(async (context, command) => {
        const [key] = command.processedArgs as [ProfileKey];
        const value = (await context.profile())[key];
        const out = await context.output();
        if (out.json)
          return out.jsonValue({ profile: context.profileName, key, value: value ?? null });
        if (value === undefined) {
          throw new CliError(`${key} is not set in profile "${context.profileName}"`, EXIT.failure);
        }
        out.print(value);
      }),
    );
  config
    .command('set')
    .description('change one setting of the profile')
    .argument('<key>', KEYS.join(' | '), parseKey)
    .argument('<value>', 'the new value')
    .option('--force', 'replace an API key the profile already holds')
    .addHelpText(
      'after',
      '\nExamples:\n  agentctl config set base_url https://agents.example.org\n  agentctl --profile ci config set api_key agk_…',
    )
    .action(
      action(async (context, command) => {
        const [key, value] = command.processedArgs as [ProfileKey, string];
        const checked = await validate(key, value);
        const config = await context.config();
        const held = config.get(context.profileName).api_key;
        if (key === 'api_key' && held && held !== checked && !command.opts().force) {
          // It may be the only copy: the service shows a key once.
          throw new CliError(
            `profile "${context.profileName}" already holds an API key (${masked('api_key', held)}); pass --force to replace it, or use another --profile`,
            EXIT.usage,
          );
        }
        config.set(context.profileName, { [key]: checked });
        const out = await context.output();
        if (out.json)
          return out.jsonValue({ profile: context.profileName, key, value: masked(key, value) });
        out.info(`set ${key} in profile "${context.profileName}"`);
      }),
    );
  config
    .command('unset')
    .description('remove one setting from the profile')
    .argument('<key>', KEYS.join(' | '), parseKey)
    .addHelpText('after', '\nExample:\n  agentctl config unset api_key')
    .action(
      action(async (context, command) => {
        const [key] = command.processedArgs as [ProfileKey];
        (await context.config()).unset(context.profileName, key);
        const out = await context.output();
        if (out.json) return out.jsonValue({ profile: context.profileName, key, value: null });
        out.info(`removed ${key} from profile "${context.profileName}"`);
      }),
    );
  config
    .command('list')
    .description(
      'print every setting in effect for the profile, and where it comes from: flag, env, profile or default (the API key by its prefix)',
    )
    .addHelpText('after', '\nExample:\n  agentctl --profile live config list')
    .action(
      action(async (context) => {
        const profile = await context.profile();
        const { DEFAULT_BASE_URL } = await import('../../config/profiles.ts');
        const env = (name: string) => (context.env[name] === '' ? undefined : context.env[name]);
        // The same precedence as every command: flag, then environment, then profile, then default.
        const effective: Record<ProfileKey, { value: string | undefined; source: string }> = {
          base_url: pick([
            [context.globals.baseUrl, 'flag --base-url'],
            [env('AGENTCTL_BASE_URL'), 'env AGENTCTL_BASE_URL'],
            [profile.base_url, 'profile'],
            [DEFAULT_BASE_URL, 'default'],
          ]),
          data_url: pick([
            [env('AGENTCTL_DATA_URL'), 'env AGENTCTL_DATA_URL'],
            [profile.data_url, 'profile'],
            [
              context.globals.baseUrl ??
                env('AGENTCTL_BASE_URL') ??
                profile.base_url ??
                DEFAULT_BASE_URL,
              'the base URL',
            ],
          ]),
          wallet_address: pick([[profile.wallet_address, 'profile']]),
          keystore: pick([[profile.keystore, 'profile']]),
          api_key: pick([
            [context.globals.apiKey, 'flag --api-key'],
            [env('AGENTCTL_API_KEY'), 'env AGENTCTL_API_KEY'],
            [profile.api_key, 'profile'],
          ]),
        };
        const profileSource =
          context.globals.profile !== undefined
            ? 'flag --profile'
            : env('AGENTCTL_PROFILE') !== undefined
              ? 'env AGENTCTL_PROFILE'
              : 'default';
        const out = await context.output();
        if (out.json) {
          return out.jsonValue({
            profile: context.profileName,
            ...Object.fromEntries(
              KEYS.map((key) => [key, masked(key, effective[key].value) ?? null]),
            ),
            sources: {
              profile: profileSource,
              ...Object.fromEntries(KEYS.map((key) => [key, effective[key].source])),
            },
          });
        }
        out.table(
          ['setting', 'value', 'from'],
          [
            ['profile', context.profileName, profileSource],
            ...KEYS.map((key) => [
              key,
              masked(key, effective[key].value) ?? '(not set)',
              effective[key].source,
            ]),
          ],
        );
      }),
    );
  config
    .command('path')
    .description('print where the configuration file is')
    .addHelpText('after', '\nExample:\n  agentctl config path')
    .action(
      action(async (context) => {
        const config = await context.config();
        const out = await context.output();
        if (out.json) return out.jsonValue({ path: config.path, keystores: config.keystoreDir });
        out.print(config.path);
      }),
    );
  return config;
}
