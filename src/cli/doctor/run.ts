import { DEFAULT_BASE_URL } from '../../config/keys.ts';
import type { Config } from '../../config/profiles.ts';
import { NODE_ENGINE, VERSION } from '../../version.ts';
import type { Context } from '../context.ts';
import { checkAnvil } from './anvil.ts';
import { type Check, skipped } from './check.ts';
import {
  checkConfig,
  checkKeystores,
  checkNode,
  checkProfile,
  type ProfileSource,
} from './local.ts';
import { checkService, type ServiceTarget } from './service.ts';

/** The message of a failure, without the CLI's own prefix (the check's name says it). */
function configFailure(error: unknown): Error {
  const message = error instanceof Error ? error.message : String(error);
  return new Error(message.replace(/^cannot read the configuration: /, ''));
}

/**
 * Every check of `agentctl doctor`, in the order they are shown. The slow ones (anvil, the
 * two URLs) run side by side, each bounded by its own timeout.
 */
export async function runChecks(context: Context): Promise<Check[]> {
  const { env, globals } = context;
  const fromEnv = (name: string) => (env[name] === '' ? undefined : env[name]);
  const config: Config | Error = await context.config().catch(configFailure);

  const profileSource: ProfileSource =
    globals.profile !== undefined
      ? 'flag --profile'
      : fromEnv('AGENTCTL_PROFILE') !== undefined
        ? 'env AGENTCTL_PROFILE'
        : 'default';
  const profileCheck = checkProfile(context.profileName, profileSource, config);
  // A missing profile is reported above; the URLs are then checked as every command would
  // resolve them with an empty profile (flags, environment, defaults).
  if (profileCheck.exists === false) context.createsProfile();
  const profile = config instanceof Error ? {} : config.get(context.profileName);

  const baseSource =
    globals.baseUrl !== undefined
      ? 'flag --base-url'
      : fromEnv('AGENTCTL_BASE_URL') !== undefined
        ? 'env AGENTCTL_BASE_URL'
        : profile.base_url !== undefined
          ? 'profile'
          : 'default';
  const dataSource =
    globals.dataUrl !== undefined
      ? 'flag --data-url'
      : fromEnv('AGENTCTL_DATA_URL') !== undefined
        ? 'env AGENTCTL_DATA_URL'
        : profile.data_url !== undefined
          ? 'profile'
          : 'the base URL';
  let baseUrl: string;
  let dataUrl: string;
  if (config instanceof Error) {
    baseUrl = globals.baseUrl ?? fromEnv('AGENTCTL_BASE_URL') ?? DEFAULT_BASE_URL;
    dataUrl = globals.dataUrl ?? fromEnv('AGENTCTL_DATA_URL') ?? baseUrl;
  } else {
    baseUrl = await context.baseUrl();
    dataUrl = await context.dataUrl();
  }
  const target = (name: ServiceTarget['name'], url: string, source: string): ServiceTarget => ({
    name,
    url,
    source,
    profile: context.profileName,
    profileNamed: profileSource !== 'default',
  });
  const userAgent = `agentctl/${VERSION}`;
  const sameService = dataUrl.replace(/\/+$/, '') === baseUrl.replace(/\/+$/, '');

  const [anvil, base, data] = await Promise.all([
    checkAnvil(env),
    checkService(target('base_url', baseUrl, baseSource), userAgent),
    sameService ? undefined : checkService(target('data_url', dataUrl, dataSource), userAgent),
  ]);
  return [
    checkNode(process.versions.node, NODE_ENGINE),
    anvil,
    checkConfig(config, env),
    config instanceof Error
      ? skipped('keystores', 'not checked: see config')
      : checkKeystores(config.keystoreDir),
    profileCheck,
    base,
    // One service for both (the sandbox serves the data API too): asked once.
    data ?? {
      ...base,
      name: 'data_url',
      detail: `${dataUrl} (${dataSource}): the same service as base_url`,
      source: dataSource,
    },
  ];
}
