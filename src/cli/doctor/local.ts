import { existsSync, readdirSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { Config } from '../../config/profiles.ts';
import { type Check, passed, problem, skipped } from './check.ts';

/** "22.22.2" → [22, 22, 2]; anything else → undefined. */
function versionParts(text: string): [number, number, number] | undefined {
  const match = /(\d+)\.(\d+)\.(\d+)/.exec(text);
  return match ? [Number(match[1]), Number(match[2]), Number(match[3])] : undefined;
}

/** True when version `a` is at least `b`. */
function atLeast(a: [number, number, number], b: [number, number, number]): boolean {
  for (let i = 0; i < 3; i++) {
    if (a[i] !== b[i]) return (a[i] as number) > (b[i] as number);
  }
  return true;
}

/**
 * The Node.js version against package.json's `engines.node` (">=22.22.2"). The launcher
 * refuses an older Node before anything runs; this says so for a copy started another way.
 */
export function checkNode(current: string, engine: string): Check {
  const required = versionParts(engine);
  const version = current.replace(/^v/, '');
  const facts = { version, required: engine };
  const have = versionParts(version);
  if (!required || !have) return passed('node', `Node.js ${version}`, facts);
  const needed = required.join('.');
  if (!atLeast(have, required)) {
    return problem(
      'node',
      `Node.js ${version} is too old: agentctl needs ${needed} or newer`,
      `install Node.js ${needed} or newer (https://nodejs.org, or \`nvm install 24\`)`,
      facts,
    );
  }
  return passed('node', `Node.js ${version} (${needed} or newer is needed)`, facts);
}

/** File modes mean little on Windows: its permissions are ACLs. */
const MODES_APPLY = process.platform !== 'win32';

function modeOf(path: string): number {
  return statSync(path).mode & 0o777;
}

function octal(mode: number): string {
  return `0${mode.toString(8).padStart(3, '0')}`;
}

/** A directory others may write to lets them replace what is in it. */
function writableByOthers(mode: number): boolean {
  return (mode & 0o022) !== 0;
}

/** A file others may read (or write): the config holds API keys, a keystore a private key. */
function openToOthers(mode: number): boolean {
  return (mode & 0o077) !== 0;
}

/** Shell quoting for a path in a fix line, only when it needs it. */
export function shellPath(path: string): string {
  return /^[\w@%+=:,./-]+$/.test(path) ? path : `'${path.replaceAll("'", `'\\''`)}'`;
}

/**
 * The configuration: where it is (AGENTCTL_CONFIG_DIR or the platform's config dir), that
 * it can be read, and that nobody else can read the file (it holds API keys) or write to
 * its directory.
 */
export function checkConfig(
  config: Config | Error,
  env: NodeJS.ProcessEnv,
  modesApply = MODES_APPLY,
): Check {
  const from = env.AGENTCTL_CONFIG_DIR ? 'from AGENTCTL_CONFIG_DIR' : 'the default place';
  if (config instanceof Error) {
    // openConfig names the file in its message: "The config file `…/config.json` is not valid JSON."
    const file = /`([^`]+)`/.exec(config.message)?.[1];
    return problem(
      'config',
      `cannot read the configuration: ${config.message}`,
      file
        ? `repair the file, or move it aside to start afresh: mv ${shellPath(file)} ${shellPath(`${file}.bak`)}`
        : 'set AGENTCTL_CONFIG_DIR to a directory you can write to',
    );
  }
  const facts = { path: config.path };
  if (!modesApply) return passed('config', `${config.path} (${from})`, facts);
  const dir = dirname(config.path);
  const found: string[] = [];
  const fixes: string[] = [];
  const dirMode = modeOf(dir);
  if (writableByOthers(dirMode)) {
    found.push(`${dir} is mode ${octal(dirMode)}, writable by others`);
    fixes.push(`chmod go-w ${shellPath(dir)}`);
  }
  if (existsSync(config.path)) {
    const fileMode = modeOf(config.path);
    if (openToOthers(fileMode)) {
      found.push(`${config.path} is mode ${octal(fileMode)}, open to others (it holds API keys)`);
      fixes.push(`chmod 600 ${shellPath(config.path)}`);
    }
  }
  if (found.length > 0) return problem('config', found.join('; '), fixes.join(' && '), facts);
  return passed('config', `${config.path} (${from}), mode 0600`, facts);
}

/**
 * The keystores (`<config dir>/keystores/*.json`): each file readable by its owner alone
 * (0600, as `keys new` writes them), in a directory nobody else can write to.
 */
export function checkKeystores(dir: string, modesApply = MODES_APPLY): Check {
  const facts = { path: dir };
  if (!existsSync(dir)) {
    return passed('keystores', `none yet (${dir}; \`agentctl keys new\` creates one)`, facts);
  }
  let files: string[];
  try {
    files = readdirSync(dir)
      .filter((file) => file.endsWith('.json') && !file.startsWith('.'))
      .sort()
      .map((file) => join(dir, file));
  } catch (error) {
    return problem(
      'keystores',
      `cannot read ${dir}: ${(error as Error).message}`,
      `chmod 700 ${shellPath(dir)} (as its owner)`,
      facts,
    );
  }
  const count = `${files.length} keystore${files.length === 1 ? '' : 's'} in ${dir}`;
  if (!modesApply) return passed('keystores', count, facts);
  const found: string[] = [];
  const fixes: string[] = [];
  const dirMode = modeOf(dir);
  if (writableByOthers(dirMode)) {
    found.push(`${dir} is mode ${octal(dirMode)}, writable by others`);
    fixes.push(`chmod 700 ${shellPath(dir)}`);
  }
  const open = files.filter((file) => openToOthers(modeOf(file)));
  if (open.length > 0) {
    found.push(
      `${open.map((file) => `${file} is mode ${octal(modeOf(file))}`).join(', ')}: a keystore must be readable by its owner alone`,
    );
    fixes.push(`chmod 600 ${open.map(shellPath).join(' ')}`);
  }
  if (found.length > 0) return problem('keystores', found.join('; '), fixes.join(' && '), facts);
  return passed('keystores', `${count}, each mode 0600`, facts);
}

/** Where the profile's name came from, as `config list` says it. */
export type ProfileSource = 'flag --profile' | 'env AGENTCTL_PROFILE' | 'default';

/**
 * The active profile. One named with --profile or AGENTCTL_PROFILE must exist, as every
 * command but `register` and `config set` requires; the default one need not (yet). Says
 * whether an API key is stored, never the key.
 */
export function checkProfile(name: string, source: ProfileSource, config: Config | Error): Check {
  const facts = { profile: name, source };
  if (config instanceof Error) {
    return skipped('profile', `${name} (${source}); not checked: see config`, facts);
  }
  const known = config.profileNames();
  if (!known.includes(name)) {
    if (source === 'default') {
      return passed('profile', `${name} (not created yet: every setting has its default)`, {
        ...facts,
        exists: false,
      });
    }
    const others = known.length ? `, or use one of: ${known.join(', ')}` : '';
    const unset = source === 'env AGENTCTL_PROFILE' ? ' (or unset AGENTCTL_PROFILE)' : '';
    return problem(
      'profile',
      `no profile named "${name}" (${source}); ${known.length ? `profiles: ${known.join(', ')}` : 'no profiles yet'}`,
      `create it: \`agentctl --profile ${name} config set base_url <url>\` or \`agentctl --profile ${name} register\`${others}${unset}`,
      { ...facts, exists: false },
    );
  }
  const key = config.get(name).api_key ? 'an API key is stored' : 'no API key stored';
  return passed('profile', `${name} (${source}); ${key}`, { ...facts, exists: true });
}
