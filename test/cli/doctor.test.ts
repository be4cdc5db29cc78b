import { spawnSync } from 'node:child_process';
import { chmodSync, cpSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type RequestListener, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { openConfig } from '../../src/config/profiles.ts';
import { type CliResult, runCli } from '../helpers/cli.ts';
import { BIN, type ServeProcess, startServe } from '../helpers/serve.ts';

/** A plain node:http server on a free loopback port, answering with `handler`. */
async function plainServer(handler: RequestListener): Promise<{ url: string; server: Server }> {
  const server = createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server };
}

async function closed(server: Server): Promise<void> {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
}

/**
 * A loopback URL nothing listens on: port 1 (tcpmux) is never served on a test machine, and
 * unlike a port given back to the system, no other test can take it meanwhile.
 */
const NOTHING = 'http://127.0.0.1:1';

/** The human line of one check (`ok       anvil  …` or `problem  anvil  …`). */
function lineOf(stdout: string, name: string): string {
  const line = stdout
    .split('\n')
    .find((text) => new RegExp(`^(ok|problem|skipped) +${name} `).test(text));
  if (!line) throw new Error(`no ${name} line in:\n${stdout}`);
  return line;
}

/** The fix line under a problem's line. */
function fixOf(stdout: string, name: string): string {
  const lines = stdout.split('\n');
  const fix = lines[lines.indexOf(lineOf(stdout, name)) + 1] ?? '';
  expect(fix).toMatch(/^ +fix: /);
  return fix.replace(/^ +fix: /, '');
}

interface JsonCheck {
  name: string;
  ok: boolean;
  detail: string;
  fix?: string;
  [fact: string]: unknown;
}

function checksOf(result: CliResult): { ok: boolean; checks: JsonCheck[] } {
  const lines = result.stdout.trimEnd().split('\n');
  expect(lines).toHaveLength(1);
  return JSON.parse(lines[0] as string);
}

const NAMES = ['node', 'anvil', 'config', 'keystores', 'profile', 'base_url', 'data_url'];

let configDir: string;
beforeEach(() => {
  configDir = mkdtempSync(join(tmpdir(), 'agentctl-doctor-'));
});
afterEach(() => rmSync(configDir, { recursive: true, force: true }));

const doctor = (args: string[], env: NodeJS.ProcessEnv = {}) =>
  runCli([...args, 'doctor'], { AGENTCTL_CONFIG_DIR: configDir, ...env });

describe('agentctl doctor against a real serve', () => {
  let sandbox: ServeProcess;
  beforeAll(async () => {
    sandbox = await startServe(['--admin-token', 'doctor-test', '--log-level', 'warn']);
  });
  afterAll(async () => {
    sandbox.child.kill('SIGTERM');
    await sandbox.exited;
  });

  it('finds everything well, says the service is a sandbox, and exits 0', async () => {
    const result = await doctor(['--base-url', sandbox.url]);
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    const lines = result.stdout.trimEnd().split('\n');
    expect(lines.map((line) => line.split(/ +/).slice(0, 2).join(' '))).toEqual(
      NAMES.map((name) => `ok ${name}`),
    );
    expect(lineOf(result.stdout, 'anvil')).toMatch(
      /anvil 1\.7\.1 at \S+anvil \(npm package @foundry-rs\/anvil-/,
    );
    expect(lineOf(result.stdout, 'base_url')).toContain(
      `${sandbox.url} (flag --base-url): ok, a sandbox (version 0.1.0, chain 84532)`,
    );
    expect(lineOf(result.stdout, 'data_url')).toContain(`${sandbox.url} (the base URL)`);
  });

  it('with --json, prints one object: ok, and each check with its facts', async () => {
    const result = await doctor(['--json', '--base-url', sandbox.url]);
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    const body = checksOf(result);
    expect(body.ok).toBe(true);
    expect(body.checks.map((check) => check.name)).toEqual(NAMES);
    for (const check of body.checks) {
      expect(check).toMatchObject({ ok: true, detail: expect.any(String) });
      expect(check).not.toHaveProperty('fix');
    }
    const byName = Object.fromEntries(body.checks.map((check) => [check.name, check]));
    expect(byName.base_url).toMatchObject({ url: sandbox.url, sandbox: true, status: 'ok' });
    expect(byName.anvil).toMatchObject({ version: '1.7.1', path: expect.stringMatching(/anvil$/) });
    expect(byName.config).toMatchObject({ path: join(configDir, 'config.json') });
  });

  it('checks a separate data URL on its own', async () => {
    const { url, server } = await plainServer((_request, response) => {
      response.writeHead(404, { 'content-type': 'text/html' }).end('<html>nope</html>');
    });
    try {
      const result = await doctor(['--json', '--base-url', sandbox.url], {
        AGENTCTL_DATA_URL: url,
      });
      expect(result.code).toBe(1);
      const byName = Object.fromEntries(
        checksOf(result).checks.map((check) => [check.name, check]),
      );
      expect(byName.base_url).toMatchObject({ ok: true, sandbox: true });
      expect(byName.data_url).toMatchObject({ ok: false, url, source: 'env AGENTCTL_DATA_URL' });
      expect(byName.data_url?.fix).toContain('AGENTCTL_DATA_URL');
    } finally {
      await closed(server);
    }
  });
});

describe('agentctl doctor finds problems', () => {
  it('nothing listening at the base URL: exit 1, with the command that starts a sandbox there', async () => {
    const url = NOTHING;
    const result = await doctor(['--base-url', url]);
    expect(result.code).toBe(1);
    expect(lineOf(result.stdout, 'base_url')).toMatch(
      new RegExp(
        `^problem +base_url +cannot reach ${url} \\(flag --base-url\\): connection refused`,
      ),
    );
    const port = new URL(url).port;
    expect(fixOf(result.stdout, 'base_url')).toContain(`\`agentctl serve --port ${port}\``);
    expect(result.stderr).toBe('agentctl: doctor found 2 problems\n');
  });

  it('a plain HTTP server answering HTML: not an agentctl service, in one line with a hint', async () => {
    const page = `<!DOCTYPE html>\n<html>\n<body>\n${'<p>Not Found</p>\n'.repeat(10)}</body>\n</html>`;
    const { url, server } = await plainServer((_request, response) => {
      response.writeHead(404, { 'content-type': 'text/html; charset=utf-8' }).end(page);
    });
    try {
      const result = await doctor(['--base-url', url]);
      expect(result.code).toBe(1);
      expect(lineOf(result.stdout, 'base_url')).toContain(
        `answers GET /health with HTTP 404 (text/html), not a service's health: is it an agentctl service?`,
      );
      expect(fixOf(result.stdout, 'base_url')).toContain('--base-url <url>');
      expect(result.stdout).not.toContain('Not Found');
    } finally {
      await closed(server);
    }
  });

  it('a service that accepts but never answers: a timeout, not a hang', async () => {
    const { url, server } = await plainServer(() => undefined);
    try {
      const result = await doctor(['--base-url', url]);
      expect(result.code).toBe(1);
      expect(lineOf(result.stdout, 'base_url')).toContain('timed out waiting for an answer');
      // Something holds that port: starting a sandbox there would fail.
      const port = new URL(url).port;
      const fix = fixOf(result.stdout, 'base_url');
      expect(fix).not.toContain('agentctl serve');
      expect(fix).toContain(`something answers on port ${port}, but not as an agentctl service`);
      expect(fix).toContain('check what listens there');
    } finally {
      await closed(server);
    }
  });

  it('a live service (no sandbox stamp) is fine: "not a sandbox"; a degraded one is a problem', async () => {
    let status = 'ok';
    const { url, server } = await plainServer((request, response) => {
      if (request.url !== '/health') return response.writeHead(404).end();
      response.writeHead(200, { 'content-type': 'application/json' }).end(
        JSON.stringify({
          status,
          version: '2.0.0',
          chain_id: 84532,
          chain_name: 'Base Sepolia',
          rpc_connected: status === 'ok',
          ...(status !== 'ok' && { reason: 'the indexer is behind' }),
        }),
      );
    });
    try {
      const live = await doctor(['--json', '--base-url', url]);
      const body = checksOf(live);
      expect(body.checks.find((check) => check.name === 'base_url')).toMatchObject({
        ok: true,
        sandbox: false,
        detail: `${url} (flag --base-url): ok, not a sandbox (version 2.0.0, chain 84532)`,
      });
      expect(live.code).toBe(0);
      status = 'degraded';
      const degraded = await doctor(['--base-url', url]);
      expect(degraded.code).toBe(1);
      expect(lineOf(degraded.stdout, 'base_url')).toContain(
        'degraded (the indexer is behind), not a sandbox',
      );
      expect(fixOf(degraded.stdout, 'base_url')).toContain('agentctl doctor');
    } finally {
      await closed(server);
    }
  });

  it('a /health whose body is not the Health contract is a problem, as `agentctl health` says', async () => {
    const { url, server } = await plainServer((request, response) => {
      if (request.url !== '/health') return response.writeHead(404).end();
      response
        .writeHead(200, { 'content-type': 'application/json' })
        .end(JSON.stringify({ status: 'ok', version: 1 }));
    });
    try {
      const health = await runCli(['health', '--base-url', url], {
        AGENTCTL_CONFIG_DIR: configDir,
      });
      expect(health.code).not.toBe(0);
      const result = await doctor(['--json', '--base-url', url]);
      expect(result.code).toBe(1);
      const base = checksOf(result).checks.find((check) => check.name === 'base_url');
      expect(base).toMatchObject({ ok: false, reachable: true });
      expect(base?.detail).toContain('not the health of an agentctl service');
      expect(base?.detail).toContain('version');
      expect(base?.fix).toContain('--base-url <url>');
    } finally {
      await closed(server);
    }
  });

  it('a keystore readable by others: a problem, with the chmod that fixes it', async () => {
    const keystores = join(configDir, 'keystores');
    mkdirSync(keystores, { mode: 0o700 });
    chmodSync(keystores, 0o700);
    const safe = join(keystores, 'safe.json');
    const open = join(keystores, 'trader.json');
    writeFileSync(safe, '{}', { mode: 0o600 });
    writeFileSync(open, '{}');
    chmodSync(open, 0o644);
    const result = await doctor(['--base-url', NOTHING]);
    expect(result.code).toBe(1);
    expect(lineOf(result.stdout, 'keystores')).toContain(`${open} is mode 0644`);
    expect(lineOf(result.stdout, 'keystores')).not.toContain(safe);
    expect(fixOf(result.stdout, 'keystores')).toBe(`chmod 600 ${open}`);
  });

  it('a config dir others may write to, and a config file others may read', async () => {
    await openConfig({ AGENTCTL_CONFIG_DIR: configDir }).set('default', {
      api_key: 'agk_secretsecret',
    });
    chmodSync(configDir, 0o777);
    chmodSync(join(configDir, 'config.json'), 0o644);
    const result = await doctor(['--base-url', NOTHING]);
    expect(lineOf(result.stdout, 'config')).toContain('is mode 0777, writable by others');
    expect(fixOf(result.stdout, 'config')).toBe(
      `chmod go-w ${configDir} && chmod 600 ${join(configDir, 'config.json')}`,
    );
  });

  it('a config file that is not JSON: the fix moves it aside; the URLs are still checked', async () => {
    const file = join(configDir, 'config.json');
    writeFileSync(file, '{"profiles": {', { mode: 0o600 });
    const result = await doctor(['--json', '--base-url', NOTHING]);
    const byName = Object.fromEntries(checksOf(result).checks.map((check) => [check.name, check]));
    expect(byName.config).toMatchObject({
      ok: false,
      fix: `repair the file, or move it aside to start afresh: mv ${file} ${file}.bak`,
    });
    expect(byName.config?.detail).toContain('is not valid JSON');
    // Not checked is not ok: skipped, which --json says, and the human table too.
    expect(byName.keystores).toMatchObject({
      ok: false,
      skipped: true,
      detail: 'not checked: see config',
    });
    expect(byName.profile).toMatchObject({ ok: false, skipped: true });
    expect(byName.profile?.detail).toContain('not checked: see config');
    expect(byName.keystores?.fix).toBeUndefined();
    expect(result.code).toBe(1);
    const human = await doctor(['--base-url', NOTHING]);
    expect(lineOf(human.stdout, 'keystores')).toMatch(
      /^skipped +keystores +not checked: see config$/,
    );
    expect(lineOf(human.stdout, 'profile')).toMatch(/^skipped +profile /);
    // Problems are counted without the checks skipped because of one.
    const problems = checksOf(result).checks.filter((check) => !check.ok && !check.skipped);
    expect(human.stderr).toContain(`doctor found ${problems.length} problem`);
    expect(byName.base_url).toMatchObject({ ok: false, url: NOTHING, reachable: false });
  });

  it('AGENTCTL_ANVIL_PATH pointing nowhere: says so, and how to fix it', async () => {
    const result = await doctor(['--base-url', NOTHING], {
      AGENTCTL_ANVIL_PATH: '/nowhere/anvil',
    });
    expect(result.code).toBe(1);
    expect(lineOf(result.stdout, 'anvil')).toMatch(
      /^problem +anvil +AGENTCTL_ANVIL_PATH is \/nowhere\/anvil, which does not exist$/,
    );
    expect(fixOf(result.stdout, 'anvil')).toMatch(
      /^point AGENTCTL_ANVIL_PATH at an anvil binary, or `unset AGENTCTL_ANVIL_PATH` to use the npm package @foundry-rs\/anvil-/,
    );
  });

  it('no anvil anywhere: names the package for this platform and the command that installs it', () => {
    // An install without the optional anvil package: the bundle alone (it needs no
    // node_modules), with nothing on PATH.
    const install = join(configDir, 'install');
    const root = join(BIN, '..', '..');
    for (const part of ['bin', 'dist', 'package.json']) {
      cpSync(join(root, part), join(install, part), { recursive: true });
    }
    const emptyPath = join(configDir, 'empty-bin');
    mkdirSync(emptyPath);
    const result = spawnSync(
      process.execPath,
      [join(install, 'bin', 'agentctl.js'), '--base-url', 'http://127.0.0.1:1', 'doctor'],
      { env: { AGENTCTL_CONFIG_DIR: configDir, PATH: emptyPath }, encoding: 'utf8' },
    );
    expect(result.status).toBe(1);
    const pkg = `@foundry-rs/anvil-${process.platform}-${process.arch === 'x64' ? 'amd64' : process.arch}`;
    expect(lineOf(result.stdout, 'anvil')).toContain(
      `not found: AGENTCTL_ANVIL_PATH is not set, the npm package ${pkg} is not installed, and there is no anvil on PATH`,
    );
    expect(fixOf(result.stdout, 'anvil')).toBe(
      `install it: \`npm install ${pkg}@1.7.1\` where agentctl is installed (add -g for a global install), or set AGENTCTL_ANVIL_PATH to an anvil binary`,
    );
  });

  it('AGENTCTL_ANVIL_PATH naming something that is not anvil: does not run', async () => {
    const fake = join(configDir, 'anvil');
    writeFileSync(fake, '#!/bin/sh\necho broken >&2\nexit 3\n', { mode: 0o755 });
    const result = await doctor(['--base-url', NOTHING], { AGENTCTL_ANVIL_PATH: fake });
    expect(lineOf(result.stdout, 'anvil')).toContain(
      `${fake} (AGENTCTL_ANVIL_PATH) does not run: \`${fake} --version\` exited with 3: broken`,
    );
  });

  it('a profile named with --profile or AGENTCTL_PROFILE that does not exist', async () => {
    await openConfig({ AGENTCTL_CONFIG_DIR: configDir }).set('work', {
      base_url: 'http://x.example',
    });
    const url = NOTHING;
    const byFlag = await doctor(['--profile', 'wrok', '--base-url', url]);
    expect(byFlag.code).toBe(1);
    expect(lineOf(byFlag.stdout, 'profile')).toContain(
      'no profile named "wrok" (flag --profile); profiles: work',
    );
    expect(fixOf(byFlag.stdout, 'profile')).toBe(
      'create it: `agentctl --profile wrok config set base_url <url>` or `agentctl --profile wrok register`, or use one of: work',
    );
    const byEnv = await doctor(['--json', '--base-url', url], { AGENTCTL_PROFILE: 'wrok' });
    const profile = checksOf(byEnv).checks.find((check) => check.name === 'profile');
    expect(profile).toMatchObject({ ok: false, profile: 'wrok', source: 'env AGENTCTL_PROFILE' });
    expect(profile?.fix).toContain('unset AGENTCTL_PROFILE');
  });

  it('--json: one object on stdout with every problem and its fix; the error on stderr; no secrets', async () => {
    const secret = 'agk_0123456789abcdef0123456789abcdef';
    await openConfig({ AGENTCTL_CONFIG_DIR: configDir }).set('default', { api_key: secret });
    const url = NOTHING;
    const result = await doctor(['--json', '--base-url', url, '--api-key', `${secret}x`], {
      AGENTCTL_ANVIL_PATH: '/nowhere/anvil',
    });
    expect(result.code).toBe(1);
    const body = checksOf(result);
    expect(body.ok).toBe(false);
    expect(body.checks.map((check) => check.name)).toEqual(NAMES);
    const failed = body.checks.filter((check) => !check.ok);
    expect(failed.map((check) => check.name)).toEqual(['anvil', 'base_url', 'data_url']);
    for (const check of failed) expect(check.fix).toEqual(expect.any(String));
    expect(body.checks.find((check) => check.name === 'base_url')).toMatchObject({
      url,
      reachable: false,
      sandbox: null,
      status: null,
    });
    expect(JSON.parse(result.stderr)).toEqual({
      error: 'doctor found 3 problems',
      status: null,
      code: 'failure',
    });
    expect(result.stdout + result.stderr).not.toContain(secret);
  });
});
