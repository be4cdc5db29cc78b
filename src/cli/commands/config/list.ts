import { Command } from 'commander';
import { DEFAULT_BASE_URL, PROFILE_KEYS, type ProfileKey } from '../../../config/keys.ts';
import { action } from '../../action.ts';
import { type Context, sameService } from '../../context.ts';
import { maskedSetting } from '../../format.ts';

/** `agentctl config list` takes no options of its own. */
export type ConfigListOptions = Record<string, never>;

export function configListCommand(): Command {
  return new Command('list')
    .description(
      'print every setting in effect for the profile, and where it comes from: flag, env, profile or default (the API key by its prefix)',
    )
    .addHelpText('after', '\nExample:\n  agentctl --profile live config list')
    .action(action((context) => run({}, context)));
}

/** The first value that is set, with where it came from; "not set" when none is. */
function pick(candidates: Array<[string | undefined, string]>): {
  value: string | undefined;
  source: string;
} {
  const found = candidates.find(([value]) => value !== undefined);
  return found ? { value: found[0], source: found[1] } : { value: undefined, source: 'not set' };
}

export async function run(_options: ConfigListOptions, context: Context): Promise<void> {
  const profile = await context.profile();
  const env = (name: string) => (context.env[name] === '' ? undefined : context.env[name]);
  const baseUrl = pick([
    [context.globals.baseUrl, 'flag --base-url'],
    [env('AGENTCTL_BASE_URL'), 'env AGENTCTL_BASE_URL'],
    [profile.base_url, 'profile'],
    [DEFAULT_BASE_URL, 'default'],
  ]);
  const apiKey = pick([
    [context.globals.apiKey, 'flag --api-key'],
    [env('AGENTCTL_API_KEY'), 'env AGENTCTL_API_KEY'],
    [profile.api_key, 'profile'],
  ]);
  // The profile's key goes only to its own service (see apiKeyFor in context.ts).
  const home = profile.base_url ?? DEFAULT_BASE_URL;
  if (apiKey.source === 'profile' && !sameService(baseUrl.value ?? home, home)) {
    apiKey.source = `profile (not sent: issued for ${home})`;
  }
  // The same precedence as every command: flag, then environment, then profile, then default.
  const effective: Record<ProfileKey, { value: string | undefined; source: string }> = {
    base_url: baseUrl,
    data_url: pick([
      [env('AGENTCTL_DATA_URL'), 'env AGENTCTL_DATA_URL'],
      [profile.data_url, 'profile'],
      [baseUrl.value, 'the base URL'],
    ]),
    wallet_address: pick([[profile.wallet_address, 'profile']]),
    keystore: pick([[profile.keystore, 'profile']]),
    api_key: apiKey,
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
        PROFILE_KEYS.map((key) => [key, maskedSetting(key, effective[key].value) ?? null]),
      ),
      sources: {
        profile: profileSource,
        ...Object.fromEntries(PROFILE_KEYS.map((key) => [key, effective[key].source])),
      },
    });
  }
  // Field lines rather than a table: a full wallet address and where each value comes from
  // fit 80 columns, and a long source (a key not sent) wraps.
  const shown = (value: string | undefined, source: string) =>
    value === undefined ? source : `${value}  from ${source}`;
  out.fields({
    profile: shown(context.profileName, profileSource),
    ...Object.fromEntries(
      PROFILE_KEYS.map((key) => [
        key,
        shown(maskedSetting(key, effective[key].value), effective[key].source),
      ]),
    ),
  });
}
