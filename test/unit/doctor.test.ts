import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { run } from '../../src/cli/commands/doctor.ts';
import { anvilVersionOf, findOnPath } from '../../src/cli/doctor/anvil.ts';
import { type Check, renderChecks } from '../../src/cli/doctor/check.ts';
import { checkNode, checkProfile, shellPath } from '../../src/cli/doctor/local.ts';
import { changeUrlHint, checkService, type ServiceTarget } from '../../src/cli/doctor/service.ts';
import { NO_COLOUR } from '../../src/cli/output.ts';
import { openConfig } from '../../src/config/profiles.ts';
import { NODE_ENGINE } from '../../src/version.ts';
import { type CannedServer, cannedServer, capturedContext } from '../helpers/run-context.ts';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'agentctl-doctor-unit-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

describe('checkNode', () => {
  it("reads the requirement from package.json's engines", () => {
    const manifest = JSON.parse(
      readFileSync(new URL('../../package.json', import.meta.url), 'utf8'),
    );
    expect(NODE_ENGINE).toBe(manifest.engines.node);
    expect(NODE_ENGINE).toBe('>=22.22.2');
  });

  it.each([
    ['24.0.0', true],
    ['22.22.2', true],
    ['22.23.0', true],
    ['23.0.0', true],
    ['22.22.1', false],
    ['22.9.9', false],
    ['20.19.0', false],
  ])('Node.js %s against >=22.22.2: ok %s', (version, ok) => {
    const check = checkNode(version, '>=22.22.2');
    expect(check.ok).toBe(ok);
    if (!ok) {
      expect(check.detail).toBe(`Node.js ${version} is too old: agentctl needs 22.22.2 or newer`);
      expect(check.fix).toContain('install Node.js 22.22.2 or newer');
    }
  });
});

describe('checkProfile', () => {
  it('the default profile need not exist; a named one must', () => {
    const config = openConfig({ AGENTCTL_CONFIG_DIR: dir });
    expect(checkProfile('default', 'default', config)).toMatchObject({ ok: true, exists: false });
    expect(checkProfile('ci', 'flag --profile', config)).toMatchObject({
      ok: false,
      detail: 'no profile named "ci" (flag --profile); no profiles yet',
      fix: 'create it: `agentctl --profile ci config set base_url <url>` or `agentctl --profile ci register`',
    });
  });

  it('says whether an API key is stored, never the key', async () => {
    const config = openConfig({ AGENTCTL_CONFIG_DIR: dir });
    await config.set('ci', { api_key: 'agk_secretsecretsecret' });
    const check = checkProfile('ci', 'env AGENTCTL_PROFILE', config);
    expect(check).toMatchObject({
      ok: true,
      detail: 'ci (env AGENTCTL_PROFILE); an API key is stored',
    });
    expect(JSON.stringify(check)).not.toContain('agk_');
  });
});

describe('anvil lookup helpers', () => {
  it('reads the version anvil prints', () => {
    expect(
      anvilVersionOf('anvil Version: 1.7.1\nCommit SHA: 4072e48705af\nBuild Profile: dist\n'),
    ).toBe('1.7.1');
    expect(anvilVersionOf('anvil 0.2.0 (5b7e4cb 2024-08-01T00:20:37.207965000Z)')).toBe('0.2.0');
  });

  it('finds an executable on PATH, as a shell would', () => {
    const empty = join(dir, 'empty');
    writeFileSync(join(dir, 'anvil'), '', { mode: 0o644 });
    expect(findOnPath('anvil', dir)).toBeUndefined();
    chmodSync(join(dir, 'anvil'), 0o755);
    expect(findOnPath('anvil', ['', empty, dir].join(delimiter))).toBe(join(dir, 'anvil'));
    expect(findOnPath('anvil', undefined)).toBeUndefined();
  });
});

describe('fix lines', () => {
  const target = (source: string, profileNamed = false): ServiceTarget => ({
    name: 'base_url',
    url: 'http://x',
    source,
    profile: 'live',
    profileNamed,
  });

  it('point where the URL came from', () => {
    expect(changeUrlHint(target('flag --base-url'))).toBe(
      "pass the service's URL with --base-url <url>",
    );
    expect(changeUrlHint(target('env AGENTCTL_BASE_URL'))).toBe(
      "set AGENTCTL_BASE_URL to the service's URL",
    );
    expect(changeUrlHint(target('profile', true))).toBe(
      '`agentctl --profile live config set base_url <url>`',
    );
    expect(changeUrlHint(target('default'))).toBe('`agentctl config set base_url <url>`');
  });

  it('quote a path only when a shell needs it', () => {
    expect(shellPath('/home/me/.config/agentctl/keystores/a.json')).toBe(
      '/home/me/.config/agentctl/keystores/a.json',
    );
    expect(shellPath("/Users/Jo Doe/it's")).toBe(`'/Users/Jo Doe/it'\\''s'`);
  });
});

describe('checkService: answers that are not a health body', () => {
  let server: CannedServer | undefined;
  afterEach(async () => {
    await server?.close();
    server = undefined;
  });

  async function answering(status: number, headers: Record<string, string>, body = '') {
    server = await cannedServer(() => ({ status, headers, text: body }));
    const url = server.url;
    return {
      url,
      check: await checkService(
        { name: 'base_url', url, source: 'profile', profile: 'default', profileNamed: false },
        'agentctl/test',
      ),
    };
  }

  it('a redirect: the URL it leads to', async () => {
    const { check } = await answering(301, { location: 'https://agents.example.org/health' });
    expect(check).toMatchObject({ ok: false, reachable: true, status: null });
    expect(check.detail).toContain('HTTP 301');
    expect(check.detail).toContain('redirecting to https://agents.example.org/health');
    expect(check.fix).toBe(
      'use the URL it redirects to (https://agents.example.org): `agentctl config set base_url <url>`',
    );
  });

  it('rate limited: wait for as long as it says', async () => {
    const { check } = await answering(
      429,
      { 'content-type': 'application/json', 'retry-after': '12' },
      JSON.stringify({ error: 'Too many requests' }),
    );
    expect(check.detail).toContain('HTTP 429 (application/json): Too many requests');
    expect(check.fix).toBe('wait (in 12 s), then run `agentctl doctor` again');
  });

  it('a failing service: its own message, in one line', async () => {
    const { check } = await answering(
      503,
      { 'content-type': 'application/json' },
      JSON.stringify({ error: { code: 'INTERNAL_ERROR', message: 'down\nfor maintenance' } }),
    );
    expect(check.detail).toContain('HTTP 503 (application/json): down for maintenance');
    expect(check.fix).toContain('tell the service operator');
  });

  it('a URL that is not http(s)', async () => {
    const check = await checkService(
      {
        name: 'data_url',
        url: 'ftp://x',
        source: 'flag --data-url',
        profile: 'default',
        profileNamed: false,
      },
      'agentctl/test',
    );
    expect(check).toMatchObject({
      ok: false,
      detail: '"ftp://x" (flag --data-url) is not an http(s) URL',
      fix: "pass the service's URL with --data-url <url>",
    });
  });
});

describe('renderChecks', () => {
  it('one line a check, the fix under a problem', () => {
    const checks: Check[] = [
      { name: 'node', ok: true, detail: 'Node.js 24.0.0' },
      { name: 'keystores', ok: false, detail: 'a.json is mode 0644', fix: 'chmod 600 a.json' },
    ];
    expect(renderChecks(checks, NO_COLOUR)).toEqual([
      'ok       node       Node.js 24.0.0',
      'problem  keystores  a.json is mode 0644',
      '                    fix: chmod 600 a.json',
    ]);
  });

  it('a skipped check says so, with no fix', () => {
    const checks: Check[] = [
      { name: 'config', ok: false, detail: 'not JSON', fix: 'mv a b' },
      { name: 'keystores', ok: false, skipped: true, detail: 'not checked: see config' },
    ];
    expect(renderChecks(checks, NO_COLOUR)).toEqual([
      'problem  config     not JSON',
      '                    fix: mv a b',
      'skipped  keystores  not checked: see config',
    ]);
  });
});

describe('run', () => {
  let server: CannedServer;
  afterEach(async () => {
    await server.close();
  });

  it('prints every check as one JSON object and fails when any check does', async () => {
    server = await cannedServer(() => ({
      status: 404,
      headers: { 'content-type': 'text/plain' },
      text: 'no',
    }));
    const { context, text } = capturedContext(
      { json: true, baseUrl: server.url },
      { AGENTCTL_CONFIG_DIR: dir, PATH: process.env.PATH },
    );
    await expect(run({}, context)).rejects.toThrow('doctor found 2 problems');
    const body = JSON.parse(text.stdout);
    expect(body.ok).toBe(false);
    expect(
      body.checks.filter((check: Check) => !check.ok).map((check: Check) => check.name),
    ).toEqual(['base_url', 'data_url']);
    expect(text.stderr).toBe('');
  });
});
