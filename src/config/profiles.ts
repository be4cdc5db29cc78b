import { dirname, join } from 'node:path';
import Conf from 'conf';

/** What a profile remembers. Every field is optional until `register` fills it in. */
export interface Profile {
  base_url?: string;
  /** The data API's URL (Part B), when it is not the base URL. */
  data_url?: string;
  wallet_address?: string;
  keystore?: string;
  api_key?: string;
}
export { DEFAULT_BASE_URL, DEFAULT_PROFILE, PROFILE_KEYS, type ProfileKey } from './keys.ts';

import type { ProfileKey } from './keys.ts';

interface Stored {
  profiles: Record<string, Profile>;
}

/**
 * Profiles on top of conf: one JSON file, mode 0600, in the XDG config dir
 * (`~/.config/agentctl/config.json`), or in `AGENTCTL_CONFIG_DIR`.
 */
export function openConfig(env: NodeJS.ProcessEnv = process.env) {
  const store = new Conf<Stored>({
    projectName: 'agentctl',
    projectSuffix: '',
    ...(env.AGENTCTL_CONFIG_DIR ? { cwd: env.AGENTCTL_CONFIG_DIR } : {}),
    configFileMode: 0o600,
    // A hand-edited file with a mistake is reported, not silently wiped.
    clearInvalidConfig: false,
    defaults: { profiles: {} },
  });
  const profiles = () => store.get('profiles') ?? {};
  return {
    path: store.path,
    dir: dirname(store.path),
    keystoreDir: join(dirname(store.path), 'keystores'),
    profileNames: () => Object.keys(profiles()).sort(),
    get(profile: string): Profile {
      return { ...profiles()[profile] };
    },
    set(profile: string, values: Profile): void {
      const all = profiles();
      store.set('profiles', { ...all, [profile]: { ...all[profile], ...values } });
    },
    unset(profile: string, key: ProfileKey): void {
      const all = profiles();
      const { [key]: _removed, ...rest } = all[profile] ?? {};
      store.set('profiles', { ...all, [profile]: rest });
    },
  };
}
export type Config = ReturnType<typeof openConfig>;
