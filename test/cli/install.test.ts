import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { generatePrivateKey } from 'viem/accounts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  bytesUnder,
  type PackedInstall,
  packAndInstall,
  packagesUnder,
} from '../../scripts/packed-install.ts';
import { anvilPackage } from '../../src/sandbox/chain/anvil.ts';

/**
 * The package as a user installs it: `npm pack`, then `npm install -g` of the tarball into a
 * fresh prefix, and the installed `agentctl`, found on PATH, run with a fresh HOME. Only what
 * the package ships is there: were dist/ to require a module it did not bundle, or the package
 * to need a file `files` leaves out, this is where it shows.
 */

/** The bound on the installed package, anvil included. */
const MAX_INSTALLED_BYTES = 100 * 1000 * 1000;
const OPERATOR = '0x000000000000000000000000000000000000dEaD';

let dir: string;
let installed: PackedInstall;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'agentctl-install-'));
  installed = packAndInstall(dir);
}, 180_000);
afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs the installed `agentctl` by name, from PATH, as the new user. */
function agentctl(args: string[], env: NodeJS.ProcessEnv = {}): Promise<Run> {
  const child = spawn('agentctl', args, {
    env: { ...installed.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk) => {
    stdout += chunk;
  });
  child.stderr.on('data', (chunk) => {
    stderr += chunk;
  });
  return new Promise((resolve) => child.on('close', (code) => resolve({ code, stdout, stderr })));
}

/** Starts the installed `agentctl serve` and resolves with its URL once it says it listens. */
function serve(
  args: string[],
): Promise<{ url: string; child: ChildProcess; exited: Promise<Run> }> {
  const child = spawn('agentctl', ['serve', '--port', '0', '--log-level', 'warn', ...args], {
    env: installed.env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stderr?.on('data', (chunk) => {
    stderr += chunk;
  });
  const exited = new Promise<Run>((resolve) =>
    child.on('close', (code) => resolve({ code, stdout, stderr })),
  );
  return new Promise((resolve, reject) => {
    child.stdout?.on('data', (chunk) => {
      stdout += chunk;
      const url = /listening on (http:\/\/\S+)/.exec(stdout)?.[1];
      if (url) resolve({ url, child, exited });
    });
    exited.then((run) =>
      reject(
        new Error(`serve exited ${run.code} before it was ready:\n${run.stdout}${run.stderr}`),
      ),
    );
  });
}

describe('the packed package, installed with npm install -g', () => {
  it('holds agentctl and this platform’s anvil, and nothing else, within 100 MB', () => {
    // dist/ bundles every module it runs: the only dependency left is anvil's binary package.
    expect(packagesUnder(installed.packageDir)).toEqual([anvilPackage()]);
    expect(bytesUnder(installed.prefix)).toBeLessThanOrEqual(MAX_INSTALLED_BYTES);
  });

  it('puts agentctl on PATH, which answers --version', async () => {
    const version = await agentctl(['--version']);
    expect(version.code, version.stderr).toBe(0);
    const manifest = JSON.parse(readFileSync(join(installed.packageDir, 'package.json'), 'utf8'));
    expect(version.stdout).toBe(`${manifest.version}\n`);
  });

  it('serves a sandbox, registers and deposits against it, and stops with 0 on Ctrl-C', async () => {
    const sandbox = await serve(['--state', join(dir, 'state')]);
    try {
      const env = { AGENTCTL_BASE_URL: sandbox.url };
      const registered = await agentctl(
        ['register', '--name', 'Installed Agent', '--operator', OPERATOR],
        { ...env, AGENTCTL_PRIVATE_KEY: generatePrivateKey() },
      );
      expect(registered.code, registered.stderr).toBe(0);
      expect(registered.stderr).toContain(join(installed.home, '.config', 'agentctl'));
      expect(registered.stdout).toMatch(/^registered Installed Agent \(0x[0-9a-fA-F]{40}\)/);

      // The API key the registration stored in the new HOME's profile.
      const deposit = await agentctl(['deposit', 'moderate', '100', '--yes'], env);
      expect(deposit.code, deposit.stderr).toBe(0);
      expect(deposit.stdout).toMatch(/^deposited 100 USDC \(100000000 raw\) into /m);
      expect(deposit.stdout).toMatch(/^deposit tx {2}0x[0-9a-f]{64}$/m);
    } finally {
      sandbox.child.kill('SIGINT');
    }
    const stopped = await sandbox.exited;
    expect(stopped.code, stopped.stderr).toBe(0);
  }, 60_000);
});
