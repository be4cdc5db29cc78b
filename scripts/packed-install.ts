/**
 * The package as a user gets it: `npm pack` of this checkout, then `npm install -g` of the
 * tarball into a fresh prefix, run with a fresh HOME. Used by test/cli/install.test.ts (which
 * runs the installed `agentctl`) and by bench/install-size.ts (which prints its size).
 *
 * dist/ must be built already: the pack runs no scripts (`prepare` would rebuild dist/ under
 * the tests that are running from it).
 */
import { spawnSync } from 'node:child_process';
import { lstatSync, mkdirSync, readdirSync } from 'node:fs';
import { delimiter, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');

export interface PackedInstall {
  /** The tarball `npm pack` wrote. */
  tarball: string;
  /** The `--prefix` of the global install: `bin/agentctl` and `lib/node_modules/agentctl`. */
  prefix: string;
  /** The installed package's directory. */
  packageDir: string;
  /** A HOME no one has used: no config, no keys, no state. */
  home: string;
  /**
   * An environment for running the installed `agentctl` as a new user would: the fresh HOME,
   * the prefix's bin first on PATH (then this Node's), nothing of agentctl's or npm's own.
   */
  env: NodeJS.ProcessEnv;
}

/** The environment without agentctl's variables, npm's (set when run under `npm test`), or XDG's. */
function cleanEnvironment(): NodeJS.ProcessEnv {
  return Object.fromEntries(
    Object.entries(process.env).filter(
      ([key]) =>
        !key.startsWith('AGENTCTL_') &&
        !key.toLowerCase().startsWith('npm_') &&
        !key.startsWith('XDG_') &&
        key !== 'FORCE_COLOR',
    ),
  );
}

function npm(args: string[], options: { cwd: string; env?: NodeJS.ProcessEnv }): string {
  const run = spawnSync('npm', args, { ...options, encoding: 'utf8' });
  if (run.status !== 0) {
    throw new Error(`npm ${args.join(' ')} exited ${run.status}:\n${run.stdout}\n${run.stderr}`);
  }
  return run.stdout;
}

/**
 * Packs this checkout into `dir` and installs the tarball globally under `dir/prefix`.
 *
 * npm runs with the fresh HOME too, so no user npmrc applies; it is given the registry and the
 * download cache of the environment it was called from, and prefers that cache (`--prefer-offline`),
 * so a machine that has installed anvil once installs it again without downloading it. A
 * tarball install runs no `prepare` (npm runs it for git and directory installs only), so the
 * build tools, devDependencies, are not needed and not installed.
 */
export function packAndInstall(dir: string): PackedInstall {
  const home = join(dir, 'home');
  const prefix = join(dir, 'prefix');
  mkdirSync(home, { recursive: true });
  const [packed] = JSON.parse(
    npm(['pack', '--json', '--ignore-scripts', '--pack-destination', dir], { cwd: ROOT }),
  ) as Array<{ filename: string }>;
  if (!packed) throw new Error('npm pack reported no tarball');
  const tarball = join(dir, packed.filename);
  const cache = npm(['config', 'get', 'cache'], { cwd: dir }).trim();
  const registry = npm(['config', 'get', 'registry'], { cwd: dir }).trim();
  const env = cleanEnvironment();
  npm(
    [
      'install',
      '--global',
      '--prefix',
      prefix,
      '--cache',
      cache,
      '--registry',
      registry,
      '--prefer-offline',
      '--no-audit',
      '--no-fund',
      '--no-update-notifier',
      tarball,
    ],
    { cwd: dir, env: { ...env, HOME: home } },
  );
  const bin = process.platform === 'win32' ? prefix : join(prefix, 'bin');
  const lib = process.platform === 'win32' ? prefix : join(prefix, 'lib');
  return {
    tarball,
    prefix,
    packageDir: join(lib, 'node_modules', 'agentctl'),
    home,
    env: {
      ...env,
      HOME: home,
      USERPROFILE: home,
      PATH: [bin, dirname(process.execPath), env.PATH ?? ''].join(delimiter),
    },
  };
}

/** Bytes of the files under `path` (their apparent size, as `du -sb`; links not followed). */
export function bytesUnder(path: string): number {
  const stat = lstatSync(path);
  if (!stat.isDirectory()) return stat.size;
  let total = stat.size;
  for (const name of readdirSync(path)) total += bytesUnder(join(path, name));
  return total;
}

/** The packages installed under a package's node_modules (scoped ones as `@scope/name`). */
export function packagesUnder(packageDir: string): string[] {
  const found: string[] = [];
  const walk = (modules: string) => {
    let names: string[];
    try {
      names = readdirSync(modules);
    } catch {
      return;
    }
    for (const name of names) {
      if (name.startsWith('.')) continue;
      if (name.startsWith('@')) {
        for (const scoped of readdirSync(join(modules, name))) {
          found.push(`${name}/${scoped}`);
          walk(join(modules, name, scoped, 'node_modules'));
        }
      } else {
        found.push(name);
        walk(join(modules, name, 'node_modules'));
      }
    }
  };
  walk(join(packageDir, 'node_modules'));
  return found.sort();
}
