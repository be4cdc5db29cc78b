/**
 * The command line's start-up: each command's median wall time, start to exit, next to bare
 * `node -e 0` measured in the same run, with the budget (`--help` at most 2×, `--json
 * vaults` at most 3×). `--json vaults` is measured twice: with `--base-url` and an empty config
 * dir (the configuration is never opened), and as a user runs it, with a profile holding the
 * base_url and api_key in config.json (the configuration is read). Part of `npm run bench`; on
 * its own, after `npm run build:dist` (it starts a sandbox of its own for the vaults rows):
 *
 *   node bench/cli-startup.ts [--quick]
 */
import { spawn, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const BIN = fileURLToPath(new URL('../bin/agentctl.js', import.meta.url));

export interface StartupRow {
  name: string;
  ms: number;
  /** The most it may take, as a multiple of `node -e 0`; none for a figure without a budget. */
  budget?: number;
}

/** Wall time of running `args` with node, start to exit. */
function runMs(args: string[], env: NodeJS.ProcessEnv): number {
  const started = performance.now();
  const result = spawnSync(process.execPath, args, { env, stdio: ['ignore', 'ignore', 'pipe'] });
  const ms = performance.now() - started;
  if (result.status !== 0)
    throw new Error(`${args.join(' ')} exited ${result.status}: ${result.stderr}`);
  return ms;
}

function median(times: number[]): number {
  const sorted = [...times].sort((a, b) => a - b);
  return sorted[Math.floor((sorted.length - 1) / 2)] as number;
}

/**
 * Times each command against the service at `url` (a warm sandbox), `runs` times each. The
 * first row is `node -e 0`, the peer every other row is compared with.
 */
export function measureCliStartup(url: string, runs: number): StartupRow[] {
  const dir = mkdtempSync(join(tmpdir(), 'agentctl-bench-cli-'));
  try {
    const empty = join(dir, 'empty');
    const withProfile = join(dir, 'profile');
    mkdirSync(empty);
    mkdirSync(withProfile);
    // As `register` leaves it: the service's URL and the key it issued (a public read sends none).
    const profile = { base_url: url, api_key: `agk_${'0'.repeat(64)}` };
    writeFileSync(
      join(withProfile, 'config.json'),
      JSON.stringify({ profiles: { default: profile } }, undefined, '\t'),
      { mode: 0o600 },
    );
    const env = (configDir: string) => ({ ...process.env, AGENTCTL_CONFIG_DIR: configDir });
    const commands: Array<{ name: string; args: string[]; configDir: string; budget?: number }> = [
      { name: 'node -e 0', args: ['-e', '0'], configDir: empty },
      { name: 'agentctl --version', args: [BIN, '--version'], configDir: empty },
      { name: 'agentctl --help', args: [BIN, '--help'], configDir: empty, budget: 2 },
      {
        name: 'agentctl --json vaults, --base-url, empty config dir',
        args: [BIN, '--base-url', url, '--json', 'vaults'],
        configDir: empty,
        budget: 3,
      },
      {
        name: 'agentctl --json vaults, a profile with base_url, api_key',
        args: [BIN, '--json', 'vaults'],
        configDir: withProfile,
        budget: 3,
      },
    ];
    // Taken in turns, one run of each command per round, so that a change in the machine's
    // load (it is often shared) falls on every command alike rather than on one block of runs.
    const timed = commands.map((command) => ({ ...command, times: [] as number[] }));
    for (let round = 0; round < runs; round++) {
      for (const { args, configDir, times } of timed) times.push(runMs(args, env(configDir)));
    }
    return timed.map(({ name, budget, times }) => ({
      name,
      ms: median(times),
      ...(budget !== undefined && { budget }),
    }));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Prints the rows of `npm run bench` (`row` pads the name, as run.ts's does). */
export function printCliStartup(
  rows: StartupRow[],
  runs: number,
  row: (name: string, ...cells: string[]) => void,
): void {
  const peer = rows[0]?.ms ?? Number.NaN;
  row(
    `command (median of ${runs}, warm serve)`,
    'ms'.padStart(10),
    'vs node -e 0'.padStart(14),
    'target'.padStart(10),
  );
  for (const { name, ms, budget } of rows) {
    row(
      name,
      ms.toFixed(1).padStart(10),
      `${(ms / peer).toFixed(2)}x`.padStart(14),
      (budget === undefined ? '' : `≤ ${budget.toFixed(2)}x`).padStart(10),
    );
  }
}

/** A sandbox of this module's own, for a run on its own: its URL, and how to stop it. */
async function startSandbox(): Promise<{ url: string; stop: () => Promise<void> }> {
  const child = spawn(
    process.execPath,
    [BIN, 'serve', '--port', '0', '--rate-limit', 'off', '--log-level', 'warn'],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  // Said only if it fails to start (its shutdown line would land among the rows).
  let errors = '';
  child.stderr.on('data', (chunk) => {
    errors += chunk;
  });
  const url = await new Promise<string>((resolve, reject) => {
    let out = '';
    child.stdout.on('data', (chunk) => {
      out += chunk;
      const match = /listening on (http:\/\/\S+)/.exec(out);
      if (match?.[1]) resolve(match[1]);
    });
    child.once('exit', (code) =>
      reject(new Error(`agentctl serve exited with ${code}: ${errors}`)),
    );
  });
  return {
    url,
    stop: () =>
      new Promise((resolve) => {
        child.removeAllListeners('exit');
        child.once('exit', () => resolve());
        child.kill('SIGTERM');
      }),
  };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const runs = process.argv.includes('--quick') ? 5 : 15;
  const sandbox = await startSandbox();
  try {
    printCliStartup(measureCliStartup(sandbox.url, runs), runs, (name, ...cells) =>
      console.log(name.padEnd(58), ...cells),
    );
  } finally {
    await sandbox.stop();
  }
}
