import { readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { basename, dirname, join, resolve } from 'node:path';

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

import { PROFILE_KEYS, type ProfileKey } from './keys.ts';

/** The file: `profiles`, and whatever else another version of agentctl keeps beside it. */
interface Stored {
  [key: string]: unknown;
  profiles: Record<string, Profile>;
  /**
   * The services (scheme://host:port) seen honouring Idempotency-Key, oldest first, at most
   * MAX_KEY_HONOURING_SERVICES: a failed write is retried only there (src/api/idempotency.ts).
   */
  idempotency_key_services?: unknown;
}

/** How many services honouring Idempotency-Key are remembered; the oldest are dropped. */
export const MAX_KEY_HONOURING_SERVICES = 64;

/** The file holds API keys: its owner alone may read it. */
const FILE_MODE = 0o600;

/**
 * Profiles in one JSON file, mode 0600: `config.json` in `AGENTCTL_CONFIG_DIR`, else in the
 * platform's config dir (`~/.config/agentctl` or `$XDG_CONFIG_HOME/agentctl` on Linux,
 * `~/Library/Preferences/agentctl` on macOS, `%APPDATA%\agentctl\Config` on Windows).
 *
 * This module alone knows the format. It reads it with node:fs and writes it with conf, which
 * is loaded only to write: conf loads ajv and semver for a schema and migrations this file does
 * not use, about 20 ms on every command that reads a profile (`agentctl --json vaults` among
 * them) when it was opened for reads too. A read never writes: a missing file is an empty configuration, created by the first `set`. A
 * file that is not JSON, or not the shape below, is reported, never silently replaced: it may
 * hold the only copy of an API key.
 */
export function openConfig(env: NodeJS.ProcessEnv = process.env) {
  const path = resolve(env.AGENTCTL_CONFIG_DIR || defaultConfigDir(env), 'config.json');
  let stored = readStored(path);
  const profiles = () => stored.profiles;
  /**
   * Re-reads the file before changing it, so a change another process made since is kept. The
   * writer is loaded first: nothing awaits between the read and the write, where another
   * command's change (a register's one-time API key) would be written over.
   */
  const updateStored = async (change: (current: Stored) => Stored) => {
    const write = await storeWriter(path);
    const next = change(readStored(path));
    write(next);
    stored = next;
  };
  const update = (change: (all: Record<string, Profile>) => Record<string, Profile>) =>
    updateStored((current) => ({ ...current, profiles: change(current.profiles) }));
  return {
    path,
    dir: dirname(path),
    keystoreDir: join(dirname(path), 'keystores'),
    profileNames: () => Object.keys(profiles()).sort(),
    get(profile: string): Profile {
      return { ...profiles()[profile] };
    },
    set(profile: string, values: Profile): Promise<void> {
      return update((all) => ({ ...all, [profile]: { ...all[profile], ...values } }));
    },
    unset(profile: string, key: ProfileKey): Promise<void> {
      return update((all) => {
        const { [key]: _removed, ...rest } = all[profile] ?? {};
        return { ...all, [profile]: rest };
      });
    },
    /** Whether the service at `origin` (scheme://host:port) was seen honouring keys. */
    honoursIdempotencyKeys(origin: string): boolean {
      return keyHonouringServices(stored).includes(origin);
    },
    /** Remembers that the service at `origin` honours keys (the oldest beyond the bound go). */
    rememberIdempotencyKeys(origin: string): Promise<void> {
      return updateStored((current) => {
        const known = keyHonouringServices(current).filter((known) => known !== origin);
        return {
          ...current,
          idempotency_key_services: [...known, origin].slice(-MAX_KEY_HONOURING_SERVICES),
        };
      });
    },
    /** Forgets the service at `origin`: a keyed write's answer showed it ignores keys. */
    forgetIdempotencyKeys(origin: string): Promise<void> {
      return updateStored((current) => ({
        ...current,
        idempotency_key_services: keyHonouringServices(current).filter((known) => known !== origin),
      }));
    },
  };
}
export type Config = ReturnType<typeof openConfig>;

/** The remembered services honouring keys; a damaged list counts as empty (it is only a cache). */
function keyHonouringServices(stored: Stored): string[] {
  const list = stored.idempotency_key_services;
  return Array.isArray(list) ? list.filter((item): item is string => typeof item === 'string') : [];
}

/** The platform's config dir for agentctl, as env-paths (and so conf) chose it. */
function defaultConfigDir(env: NodeJS.ProcessEnv): string {
  const home = homedir();
  if (process.platform === 'darwin') return join(home, 'Library', 'Preferences', 'agentctl');
  if (process.platform === 'win32') {
    return join(env.APPDATA || join(home, 'AppData', 'Roaming'), 'agentctl', 'Config');
  }
  return join(env.XDG_CONFIG_HOME || join(home, '.config'), 'agentctl');
}

/** The file's contents, checked; an empty configuration when there is no file yet. */
function readStored(path: string): Stored {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return { profiles: {} };
    throw error;
  }
  let data: unknown;
  try {
    // An editor may save a byte order mark, which JSON.parse refuses.
    data = JSON.parse(text.replace(/^\uFEFF/, ''));
  } catch {
    // Not JSON.parse's message: it quotes the text around the mistake, which may be a key.
    // The path is in backticks: `agentctl doctor` takes it from there for its fix.
    throw new SyntaxError(`The config file \`${path}\` is not valid JSON.`);
  }
  const problem = shapeProblem(data);
  if (problem) throw new Error(`The config file \`${path}\` is not a configuration: ${problem}.`);
  const store = data as Partial<Stored>;
  return { ...store, profiles: store.profiles ?? {} };
}

/**
 * What is wrong with the file's shape, if anything: an object whose `profiles` maps names to
 * objects of strings. Keys this version does not know are kept (a newer one may write them).
 */
function shapeProblem(data: unknown): string | undefined {
  if (!isObject(data)) return 'it is not a JSON object';
  if (data.profiles === undefined) return undefined;
  if (!isObject(data.profiles)) return '"profiles" is not an object';
  for (const [name, profile] of Object.entries(data.profiles)) {
    if (!isObject(profile)) return `profile "${name}" is not an object`;
    for (const key of PROFILE_KEYS) {
      if (profile[key] !== undefined && typeof profile[key] !== 'string') {
        return `${key} of profile "${name}" is not a string`;
      }
    }
  }
  return undefined;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * A writer of the whole file, with conf, loaded only here: a read, the common case, never pays
 * for it (ajv and semver come with it, about 20 ms); the write itself is synchronous. conf writes atomically (a new file, mode 0600,
 * renamed over the old one), and through a config.json that is a symbolic link.
 */
async function storeWriter(path: string): Promise<(stored: Stored) => void> {
  const { default: Conf } = await import('conf');
  return (stored) => {
    const store = new Conf<Stored>({
      projectName: 'agentctl',
      projectSuffix: '',
      cwd: dirname(path),
      configName: basename(path, '.json'),
      configFileMode: FILE_MODE,
      // The file was checked by readStored() just before: never replace what it could not read.
      clearInvalidConfig: false,
    });
    store.store = stored;
  };
}
