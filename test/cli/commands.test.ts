import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type CliResult, runCli } from '../helpers/cli.ts';
import { type ServeProcess, startServe } from '../helpers/serve.ts';

let sandbox: ServeProcess;
let configDir: string;
beforeAll(async () => {
  sandbox = await startServe(['--admin-token', 'cli-test', '--log-level', 'warn']);
  configDir = mkdtempSync(join(tmpdir(), 'agentctl-cli-config-'));
});
afterAll(async () => {
  sandbox.child.kill('SIGTERM');
  await sandbox.exited;
  rmSync(configDir, { recursive: true, force: true });
});

const cli = (args: string[], env: NodeJS.ProcessEnv = {}) =>
  runCli(['--base-url', sandbox.url, ...args], { AGENTCTL_CONFIG_DIR: configDir, ...env });

async function bodyOf(path: string): Promise<string> {
  return (await fetch(`${sandbox.url}${path}`)).text();
}

function expectOk(result: CliResult) {
  expect(result.stderr).toBe('');
  expect(result.code).toBe(0);
}

describe('public read commands', () => {
  it.each([
    [['health'], '/health'],
    [['vaults'], '/api/v1/vaults'],
    [['leaderboard', '--limit', '5'], '/api/v1/agents?limit=5'],
    [['stats'], '/api/v1/agents/stats'],
    [['proposals'], '/api/v1/proposals'],
    [
      ['lookup', '0x000000000000000000000000000000000000dEaD'],
      '/api/v1/agent/auth/lookup?wallet=0x000000000000000000000000000000000000dEaD',
    ],
  ])('%j --json prints the body exactly as received', async (args, path) => {
    const result = await cli(['--json', ...args]);
    expectOk(result);
    expect(result.stdout).toBe(`${await bodyOf(path)}\n`);
  });

  it('shows vaults as a table with their identifiers', async () => {
    const result = await cli(['vaults']);
    expectOk(result);
    for (const id of [
      'conservative',
      'moderate',
      'aggressive',
      'inverse',
      'hedged',
      'configurable',
    ]) {
      expect(result.stdout).toContain(id);
    }
    expect(result.stdout).toMatch(/ \d+(\.\d+)? USDC /);
    expect(Math.max(...result.stdout.split('\n').map((line) => line.length))).toBeLessThanOrEqual(
      80,
    );
    const wide = await cli(['vaults', '--wide']);
    expectOk(wide);
    expect(wide.stdout).toContain('Moderate USDC Vault');
    expect(wide.stdout).toMatch(/ \d+(\.\d+)? USDC \(\d+ raw\) /);
    // Not a terminal: no colour codes, same layout as on one.
    expect(result.stdout).not.toContain('\u001b[');
  });

  it('colours only when asked, and NO_COLOR wins over nothing else', async () => {
    expect((await cli(['health'], { FORCE_COLOR: '1' })).stdout).toContain('\u001b[');
    expect((await cli(['health'], { FORCE_COLOR: '1', NO_COLOR: '1' })).stdout).not.toContain(
      '\u001b[',
    );
    expect((await cli(['--no-color', 'health'], { FORCE_COLOR: '1' })).stdout).not.toContain(
      '\u001b[',
    );
  });

  it('shows health as fields', async () => {
    const result = await cli(['health']);
    expectOk(result);
    expect(result.stdout).toMatch(/^status\s+ok$/m);
    expect(result.stdout).toMatch(/^rpc_connected\s+true$/m);
  });
});

describe('failures and exit codes', () => {
  it('exits 2 before any request for a bad address or limit', async () => {
    // A service that counts what reaches it: nothing may.
    const service = await fakeService((response) => {
      response.writeHead(500);
      response.end();
    });
    try {
      const env = { AGENTCTL_CONFIG_DIR: configDir, AGENTCTL_BASE_URL: service.url };
      const lookup = await runCli(['lookup', '0x1234'], env);
      expect(lookup.code).toBe(2);
      expect(lookup.stdout).toBe('');
      expect(lookup.stderr).toBe('agentctl: wallet 0x1234: must be 0x followed by 40 hex digits\n');
      const limit = await runCli(['leaderboard', '--limit', '101'], env);
      expect(limit.code).toBe(2);
      expect(limit.stderr).toContain('must be an integer from 1 to 100');
      expect(service.count()).toBe(0);
    } finally {
      service.close();
    }
  });

  it('exits 6 fast when the service is unreachable, with one JSON object on stderr under --json', async () => {
    const started = Date.now();
    const result = await runCli(['--json', '--base-url', 'http://127.0.0.1:1', 'health'], {
      AGENTCTL_CONFIG_DIR: configDir,
    });
    expect(result.code).toBe(6);
    expect(result.stdout).toBe('');
    expect(JSON.parse(result.stderr)).toEqual({
      error: expect.stringContaining('cannot reach http://127.0.0.1:1'),
      status: null,
      code: 'unreachable',
    });
    // A refused connection is not retried: it fails at once, as gh and cast do.
    expect(Date.now() - started).toBeLessThan(2_000);
    expect(result.stderr).not.toContain('retrying');
  }, 10_000);

  it('maps the 503 of a server without keys to exit 4, keeping the service body', async () => {
    const result = await cli(['--json', 'api', 'GET', '/api/v1/agent/wallet']);
    expect(result.code).toBe(4);
    expect(result.stdout).toBe('');
    expect(JSON.parse(result.stderr)).toEqual({
      error: 'no API keys are configured on this server yet: register an agent first',
      status: 503,
      code: 'no_api_keys',
    });
  });

  it('maps 404 to exit 2 and prints the error in one line', async () => {
    const result = await cli(['api', 'GET', '/api/v1/nothing']);
    expect(result.code).toBe(2);
    expect(result.stderr).toBe('agentctl: 404: no such endpoint: GET /api/v1/nothing\n');
  });

  it('refuses invalid JSON for api --data with exit 2', async () => {
    const result = await cli(['api', 'POST', '/api/v1/nfts', '--data', '{nope']);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('must be valid JSON');
  });

  it('exits 5 on 429 without waiting out a long Retry-After', async () => {
    const limited = await startServe(['--log-level', 'warn']);
    try {
      for (let i = 0; i < 60; i++) await fetch(`${limited.url}/health`);
      const result = await runCli(['--json', '--base-url', limited.url, 'health'], {
        AGENTCTL_CONFIG_DIR: configDir,
      });
      expect(result.code).toBe(5);
      expect(JSON.parse(result.stderr)).toMatchObject({ status: 429, code: 'rate_limited' });
    } finally {
      limited.child.kill('SIGTERM');
      await limited.exited;
    }
  });
});

describe('api', () => {
  it('posts a body and prints the answer', async () => {
    const result = await cli([
      'api',
      'POST',
      '/api/v1/nfts',
      '--data',
      '{"wallet_address":"0x000000000000000000000000000000000000dEaD"}',
    ]);
    expectOk(result);
    expect(JSON.parse(result.stdout)).toMatchObject({ nfts: [], total: 0 });
  });

  it('takes a full URL on the service, and refuses one elsewhere (the key stays home)', async () => {
    const full = await cli(['--json', 'api', 'GET', `${sandbox.url}/api/v1/vaults?x=1`]);
    expectOk(full);
    expect(JSON.parse(full.stdout).vaults).toHaveLength(6);
    const elsewhere = await cli(['api', 'GET', 'https://example.org/api/v1/agent/wallet']);
    expect(elsewhere.code).toBe(2);
    expect(elsewhere.stderr).toContain('is not on the service');
  });
});

describe('config and precedence', () => {
  it('stores profile settings in a 0600 file under AGENTCTL_CONFIG_DIR', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'agentctl-cli-profile-'));
    try {
      const env = { AGENTCTL_CONFIG_DIR: dir };
      const set = await runCli(
        ['--profile', 'local', 'config', 'set', 'base_url', sandbox.url],
        env,
      );
      expect(set.code).toBe(0);
      expect(set.stderr).toBe('set base_url in profile "local"\n');
      const key = `agk_${'a'.repeat(64)}`;
      expect(
        (await runCli(['--profile', 'local', 'config', 'set', 'api_key', key], env)).code,
      ).toBe(0);
      // A typo in a key is refused, and a stored key is never replaced silently.
      const cut = await runCli(
        ['--profile', 'local', 'config', 'set', 'api_key', key.slice(0, 40)],
        env,
      );
      expect(cut.code).toBe(2);
      expect(cut.stderr).toContain('looks cut short or mistyped');
      const other = `agk_${'b'.repeat(64)}`;
      const replace = await runCli(['--profile', 'local', 'config', 'set', 'api_key', other], env);
      expect(replace.code).toBe(2);
      expect(replace.stderr).toContain('already holds an API key (agk_aaaaaaaa…); pass --force');
      const quoted = await runCli(
        ['--profile', 'local', 'config', 'set', 'api_key', `"${other}"`],
        env,
      );
      expect(quoted.code).toBe(2);
      const path = await runCli(['config', 'path'], env);
      expect(path.stdout.trim()).toBe(join(dir, 'config.json'));
      expect(statSync(join(dir, 'config.json')).mode & 0o777).toBe(0o600);
      const get = await runCli(['--profile', 'local', 'config', 'get', 'base_url'], env);
      expect(get.stdout).toBe(`${sandbox.url}\n`);
      const list = await runCli(['--profile', 'local', '--json', 'config', 'list'], env);
      expect(JSON.parse(list.stdout)).toEqual({
        profile: 'local',
        base_url: sandbox.url,
        data_url: sandbox.url,
        wallet_address: null,
        keystore: null,
        api_key: 'agk_aaaaaaaa…',
        sources: {
          profile: 'flag --profile',
          base_url: 'profile',
          data_url: 'the base URL',
          wallet_address: 'not set',
          keystore: 'not set',
          api_key: 'profile',
        },
      });
      // Where each value in effect comes from, as every command resolves it.
      const fromEnv = await runCli(['--profile', 'local', '--json', 'config', 'list'], {
        ...env,
        AGENTCTL_BASE_URL: 'http://127.0.0.1:9',
      });
      expect(JSON.parse(fromEnv.stdout)).toMatchObject({
        base_url: 'http://127.0.0.1:9',
        sources: { base_url: 'env AGENTCTL_BASE_URL' },
      });
      const human = await runCli(
        ['--profile', 'local', '--base-url', 'http://x:1', 'config', 'list'],
        env,
      );
      expect(human.stdout).toMatch(/^base_url +http:\/\/x:1 {2}from flag --base-url$/m);
      // The profile's base_url is used when neither flag nor environment says otherwise.
      expectOk(await runCli(['--profile', 'local', 'health'], env));
      // A profile named explicitly must exist, so a typo never runs against the wrong service.
      expect(
        (await runCli(['--profile', 'other', 'health'], { ...env, AGENTCTL_BASE_URL: sandbox.url }))
          .code,
      ).toBe(2);
      // Environment beats the profile; the flag beats the environment.
      const envWins = await runCli(['--profile', 'local', 'health'], {
        ...env,
        AGENTCTL_BASE_URL: 'http://127.0.0.1:1',
      });
      expect(envWins.code).toBe(6);
      const flagWins = await runCli(['--profile', 'local', '--base-url', sandbox.url, 'health'], {
        ...env,
        AGENTCTL_BASE_URL: 'http://127.0.0.1:1',
      });
      expect(flagWins.code).toBe(0);
      const profileFromEnv = await runCli(['config', 'get', 'base_url'], {
        ...env,
        AGENTCTL_PROFILE: 'local',
      });
      expect(profileFromEnv.stdout).toBe(`${sandbox.url}\n`);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);

  it('refuses bad settings with exit 2', async () => {
    expect((await cli(['config', 'set', 'base_url', 'ftp://x'])).code).toBe(2);
    expect((await cli(['config', 'set', 'wallet_address', '0x12'])).code).toBe(2);
    expect((await cli(['config', 'set', 'colour', 'blue'])).code).toBe(2);
  });
});

describe('an answer that breaks the contract', () => {
  it('exits 1 when a 200 is not JSON', async () => {
    const server = createServer((_request, response) => {
      response.writeHead(200, { 'content-type': 'text/html' });
      response.end('<html>not the service</html>');
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    try {
      const result = await runCli(['--base-url', `http://127.0.0.1:${port}`, 'health'], {
        AGENTCTL_CONFIG_DIR: configDir,
      });
      expect(result.code).toBe(1);
      expect(result.stderr).toBe(
        'agentctl: the service answered 200 with a body that is not JSON; is this an agentctl service? check --base-url (or --data-url)\n',
      );
    } finally {
      server.close();
    }
  });
});

describe('an answer whose shape the contract does not know', () => {
  it('--json prints it as received; a table, which reads its fields, refuses it with exit 1', async () => {
    const body = '{"vaults":[{"name":"Next","apy":"8.5%","extra":{"a":1}}],"total":"one"}';
    const service = await fakeService((response) => {
      response.writeHead(200, { 'content-type': 'application/json' });
      response.end(body);
    });
    try {
      const env = { AGENTCTL_CONFIG_DIR: configDir };
      const json = await runCli(['--base-url', service.url, 'vaults', '--json'], env);
      expect(json.code).toBe(0);
      expect(json.stdout).toBe(`${body}\n`);
      const table = await runCli(['--base-url', service.url, 'vaults'], env);
      expect(table.code).toBe(1);
      expect(table.stdout).toBe('');
      expect(table.stderr).toMatch(/^agentctl: unexpected answer from GET \/api\/v1\/vaults: /);
    } finally {
      service.close();
    }
  });
});

/** A fake service: `handle` answers every request; `count` says how many arrived. */
async function fakeService(handle: (response: import('node:http').ServerResponse) => void) {
  let count = 0;
  const server = createServer((_request, response) => {
    count += 1;
    handle(response);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    count: () => count,
    close: () => {
      server.closeAllConnections();
      server.close();
    },
  };
}

describe('the HTTP client against misbehaving services', () => {
  it('does not spin on Retry-After: 0', async () => {
    const service = await fakeService((response) => {
      response.writeHead(429, { 'content-type': 'application/json', 'retry-after': '0' });
      response.end('{"error":"slow down"}');
    });
    try {
      const result = await runCli(['--base-url', service.url, 'health'], {
        AGENTCTL_CONFIG_DIR: configDir,
      });
      expect(result.code).toBe(5);
      // It retried (with backoff), but did not spin.
      expect(service.count()).toBeGreaterThan(1);
      expect(service.count()).toBeLessThan(40);
      expect(result.stderr).toContain('agentctl: retrying in');
    } finally {
      service.close();
    }
  }, 20_000);

  it('gives up on a body that never ends, within the budget (exit 6)', async () => {
    const service = await fakeService((response) => {
      response.writeHead(200, { 'content-type': 'application/json' });
      const timer = setInterval(() => response.write(' '), 500);
      response.on('close', () => clearInterval(timer));
    });
    const started = Date.now();
    try {
      const result = await runCli(['--base-url', service.url, 'health'], {
        AGENTCTL_CONFIG_DIR: configDir,
      });
      expect(result.code).toBe(6);
      expect(result.stderr).toContain('timed out');
      expect(Date.now() - started).toBeLessThan(14_000);
    } finally {
      service.close();
    }
  }, 20_000);

  it('retries a GET on 502, 503 and 504, says so on stderr, and then succeeds', async () => {
    const answers = [502, 503, 504];
    const service = await fakeService((response) => {
      const status = answers.shift();
      if (status) {
        response.writeHead(status, { 'content-type': 'application/json' });
        return response.end('{"error":"try later"}');
      }
      response.writeHead(200, { 'content-type': 'application/json' });
      response.end(
        '{"status":"ok","version":"x","chain_id":84532,"chain_name":"Base Sepolia","rpc_connected":true}',
      );
    });
    try {
      const result = await runCli(['--base-url', service.url, 'health'], {
        AGENTCTL_CONFIG_DIR: configDir,
      });
      expect(result.code).toBe(0);
      expect(service.count()).toBe(4);
      expect(result.stderr.match(/^agentctl: retrying in \d+ ms \(HTTP 50[234]\)$/gm)).toHaveLength(
        3,
      );
      // --quiet silences the notices, not the result.
      answers.push(503);
      const quiet = await runCli(['--quiet', '--base-url', service.url, 'health'], {
        AGENTCTL_CONFIG_DIR: configDir,
      });
      expect(quiet.code).toBe(0);
      expect(quiet.stderr).toBe('');
    } finally {
      service.close();
    }
  }, 20_000);

  it('never retries a write against a service not known to honour keys: its outcome is unknown (7)', async () => {
    const service = await fakeService((response) => {
      response.writeHead(503, { 'content-type': 'application/json' });
      response.end('{"error":"busy"}');
    });
    try {
      const result = await runCli(
        ['--base-url', service.url, 'deposit', 'moderate', '1', '--yes'],
        {
          AGENTCTL_CONFIG_DIR: configDir,
          AGENTCTL_API_KEY: `agk_${'c'.repeat(64)}`,
        },
      );
      expect(result.code).toBe(7);
      expect(service.count()).toBe(1);
      expect(result.stderr).not.toContain('retrying');
      expect(result.stderr).toMatch(/^idempotency key: [0-9a-f-]{36}$/m);
    } finally {
      service.close();
    }
  });

  it('health exits 1 when the service reports degraded, and still prints the answer', async () => {
    const service = await fakeService((response) => {
      response.writeHead(200, { 'content-type': 'application/json' });
      response.end(
        '{"status":"degraded","version":"x","chain_id":84532,"chain_name":"Base Sepolia","rpc_connected":false}',
      );
    });
    try {
      const human = await runCli(['--base-url', service.url, 'health'], {
        AGENTCTL_CONFIG_DIR: configDir,
      });
      expect(human.code).toBe(1);
      expect(human.stdout).toMatch(/^status\s+degraded$/m);
      expect(human.stderr).toContain('the service is degraded');
      const json = await runCli(['--json', '--base-url', service.url, 'health'], {
        AGENTCTL_CONFIG_DIR: configDir,
      });
      expect(json.code).toBe(1);
      expect(JSON.parse(json.stdout)).toMatchObject({ status: 'degraded' });
    } finally {
      service.close();
    }
  });

  it('keeps every field of an error body without "error"', async () => {
    const service = await fakeService((response) => {
      response.writeHead(400, { 'content-type': 'application/json' });
      response.end('{"message":"nope","statusCode":400,"hint":"x"}');
    });
    try {
      const result = await runCli(['--json', '--base-url', service.url, 'health'], {
        AGENTCTL_CONFIG_DIR: configDir,
      });
      expect(result.code).toBe(2);
      expect(JSON.parse(result.stderr)).toEqual({
        error: 'nope',
        message: 'nope',
        statusCode: 400,
        hint: 'x',
        status: 400,
        code: 'bad_request',
      });
    } finally {
      service.close();
    }
  });
});

describe('--verbose and --quiet', () => {
  it('--verbose shows each request and its answer on stderr; stdout is unchanged', async () => {
    const plain = await cli(['--json', 'health']);
    const verbose = await cli(['--verbose', '--json', 'health']);
    expect(verbose.code).toBe(0);
    expect(verbose.stdout).toBe(plain.stdout);
    expect(verbose.stderr).toMatch(
      new RegExp(`^GET ${sandbox.url}/health → 200 \\(\\d+ ms\\)$`, 'm'),
    );
    expect(plain.stderr).toBe('');
  });

  it('--quiet drops progress and hints, not results or errors', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'agentctl-cli-quiet-'));
    try {
      const env = { AGENTCTL_CONFIG_DIR: dir };
      const loud = await runCli(['config', 'set', 'base_url', sandbox.url], env);
      expect(loud.stderr).toBe('set base_url in profile "default"\n');
      const quiet = await runCli(['--quiet', 'config', 'set', 'base_url', sandbox.url], env);
      expect(quiet.code).toBe(0);
      expect(quiet.stderr).toBe('');
      const result = await runCli(['--quiet', 'config', 'get', 'base_url'], env);
      expect(result.stdout).toBe(`${sandbox.url}\n`);
      const error = await runCli(['--quiet', 'config', 'get', 'api_key'], env);
      expect(error.code).toBe(1);
      expect(error.stderr).toContain('api_key is not set');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('usage errors', () => {
  it('are one JSON object with --json, and a missing subcommand is exit 2', async () => {
    const unknown = await cli(['--json', 'nosuch']);
    expect(unknown.code).toBe(2);
    expect(unknown.stdout).toBe('');
    expect(JSON.parse(unknown.stderr)).toEqual({
      error: "unknown command 'nosuch'",
      status: null,
      code: 'usage',
    });
    // One voice: "agentctl: …", the suggestion on its own line; in JSON, one line with a hint.
    const typoed = await cli(['depost']);
    expect(typoed.code).toBe(2);
    expect(typoed.stderr).toBe(
      "agentctl: unknown command 'depost'\ndid you mean deposit?\n(run `agentctl --help` for usage)\n",
    );
    const typoedJson = await cli(['--json', 'depost']);
    expect(JSON.parse(typoedJson.stderr)).toEqual({
      error: "unknown command 'depost'",
      hint: 'did you mean deposit?',
      status: null,
      code: 'usage',
    });
    expect(typoedJson.stderr.trim().split('\n')).toHaveLength(1);
    const option = await cli(['strategy', 'submit', '--bogus']);
    expect(option.stderr).toMatch(/^agentctl: unknown option '--bogus'\n/);
    // A local command's JSON is compact too.
    const configJson = await cli(['--json', 'config', 'path']);
    expect(configJson.stdout.trim().split('\n')).toHaveLength(1);
    expect((await cli(['keys'])).code).toBe(2);
    expect((await cli(['--base-url', 'http://a b', 'health'])).code).toBe(2);
    const typo = await runCli(['--profile', 'nosuch', 'health'], {
      AGENTCTL_CONFIG_DIR: configDir,
    });
    expect(typo.code).toBe(2);
    expect(typo.stderr).toContain('no profile named "nosuch"');
  });

  it('api HEAD prints nothing and succeeds', async () => {
    const result = await cli(['api', 'HEAD', '/health']);
    expect(result.code).toBe(0);
  });
});
