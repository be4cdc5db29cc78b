import { execFile, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { BIN } from '../helpers/serve.ts';

const run = (args: string[], nodeArgs: string[] = []) =>
  spawnSync(process.execPath, [...nodeArgs, BIN, ...args], { encoding: 'utf8' });

describe('bin/agentctl.js', () => {
  it('refuses an old Node with one line naming the required version', () => {
    const result = run(
      ['--version'],
      [
        '--import',
        'data:text/javascript,Object.defineProperty(process.versions,"node",{value:"20.1.0"})',
      ],
    );
    expect(result.status).toBe(1);
    expect(result.stdout).toBe('');
    expect(result.stderr).toBe(
      'agentctl requires Node.js 22.22.2 or newer; this is Node.js 20.1.0.\n',
    );
  });

  it('matches the engines field of package.json', () => {
    const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8'));
    expect(pkg.engines.node).toBe('>=22.22.2');
    expect(readFileSync(BIN, 'utf8')).toContain('const required = [22, 22, 2];');
  });

  it('prints the version', () => {
    const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8'));
    const result = run(['--version']);
    expect(result.status).toBe(0);
    expect(result.stdout.trim()).toBe(pkg.version);
  });

  it('prints help with the commands and the exit codes', () => {
    const result = run(['--help']);
    expect(result.status).toBe(0);
    expect(result.stdout).toContain('serve [options]');
    expect(result.stdout).toMatch(/Exit codes:[\s\S]*6 {4}service unreachable/);
  });

  it('exits 2 when no command is given, after printing help to stderr', () => {
    const result = run([]);
    expect(result.status).toBe(2);
    expect(result.stderr).toContain('Usage: agentctl');
  });

  it('exits 2 on an unknown command', () => {
    const result = run(['frobnicate']);
    expect(result.status).toBe(2);
    expect(result.stderr).toContain("unknown command 'frobnicate'");
  });

  /** Records the files a run loads, with a module load hook (what a start costs comes from these). */
  const LOAD_HOOK = `data:text/javascript,${encodeURIComponent(`
      import { registerHooks } from 'node:module';
      const loaded = [];
      registerHooks({ load(url, context, next) { loaded.push(url); return next(url, context); } });
      process.on('exit', () => process.stderr.write('LOADED ' + JSON.stringify(loaded) + '\\n'));`)}`;

  function loadedIn(stderr: string): string[] {
    const line = stderr.split('\n').find((text) => text.startsWith('LOADED '));
    return JSON.parse(line?.slice('LOADED '.length) ?? '[]');
  }

  function loadedFiles(args: string[]): string[] {
    const result = spawnSync(process.execPath, ['--import', LOAD_HOOK, BIN, ...args], {
      encoding: 'utf8',
    });
    return loadedIn(result.stderr);
  }

  /** The npm packages bundled into a dist file, from esbuild's path comments. */
  function packagesIn(url: string): string[] {
    if (!url.startsWith('file:') || !url.includes('/dist/')) return [];
    const text = readFileSync(new URL(url), 'utf8');
    return [
      ...new Set(
        [...text.matchAll(/^\/\/ node_modules\/((?:@[^/]+\/)?[^/]+)/gm)].map((m) => m[1] as string),
      ),
    ];
  }

  it.each([[['--help']], [['vaults', '--help']], [['serve', '--help']]])(
    'runs the bundle, and %j loads none of the heavy packages',
    (args) => {
      const files = loadedFiles(args);
      expect(files.some((url) => url.endsWith('/dist/main.js'))).toBe(true);
      const packages = new Set(files.flatMap(packagesIn));
      expect(packages.has('commander')).toBe(true);
      for (const heavy of ['zod', 'undici', 'viem', 'fastify', 'chalk', '@inquirer/core', 'ajv']) {
        expect(packages.has(heavy), heavy).toBe(false);
      }
    },
  );

  it('prints a read with --json without loading zod, undici or ajv; a table checks the shape with zod', async () => {
    const body = '{"vaults":[],"total":0}';
    const server = createServer((_request, response) => {
      response.writeHead(200, { 'content-type': 'application/json' });
      response.end(body);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const run = (args: string[]) =>
      promisify(execFile)(
        process.execPath,
        ['--import', LOAD_HOOK, BIN, '--base-url', url, ...args],
        {
          encoding: 'utf8',
          env: { ...process.env, AGENTCTL_CONFIG_DIR: '/nonexistent/agentctl-test' },
        },
      );
    try {
      const json = await run(['vaults', '--json']);
      expect(json.stdout).toBe(`${body}\n`);
      const packages = new Set(loadedIn(json.stderr).flatMap(packagesIn));
      for (const heavy of ['zod', 'undici', 'ajv', 'chalk', 'viem']) {
        expect(packages.has(heavy), heavy).toBe(false);
      }
      const table = await run(['vaults']);
      expect(new Set(loadedIn(table.stderr).flatMap(packagesIn)).has('zod')).toBe(true);
    } finally {
      server.close();
    }
  });

  it('reads the profile for --json vaults without loading ajv, semver, zod or undici', async () => {
    const body = '{"vaults":[],"total":0}';
    const server = createServer((_request, response) => {
      response.writeHead(200, { 'content-type': 'application/json' });
      response.end(body);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    // As a user has it after `register`: the profile names the service and holds its key.
    const dir = mkdtempSync(join(tmpdir(), 'agentctl-bin-'));
    const profile = { base_url: url, api_key: `agk_${'a'.repeat(64)}` };
    writeFileSync(join(dir, 'config.json'), JSON.stringify({ profiles: { default: profile } }), {
      mode: 0o600,
    });
    try {
      const json = await promisify(execFile)(
        process.execPath,
        ['--import', LOAD_HOOK, BIN, '--json', 'vaults'],
        { encoding: 'utf8', env: { ...process.env, AGENTCTL_CONFIG_DIR: dir } },
      );
      expect(json.stdout).toBe(`${body}\n`);
      const packages = new Set(loadedIn(json.stderr).flatMap(packagesIn));
      for (const heavy of [
        'conf',
        'ajv',
        'semver',
        'atomically',
        'zod',
        'undici',
        'chalk',
        'viem',
      ]) {
        expect(packages.has(heavy), heavy).toBe(false);
      }
    } finally {
      server.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('answers --version without loading the bundle', () => {
    const files = loadedFiles(['--version']);
    expect(files.some((url) => url.endsWith('/bin/agentctl.js'))).toBe(true);
    expect(files.filter((url) => url.includes('/dist/'))).toEqual([]);
  });
});
