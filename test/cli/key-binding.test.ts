import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openConfig } from '../../src/config/profiles.ts';
import { runCli } from '../helpers/cli.ts';
import {
  BIN,
  registerOver,
  requestOver,
  type ServeProcess,
  startServe,
  until,
} from '../helpers/serve.ts';

/**
 * A stored API key belongs to the service it was issued by (as gh binds a token to its host):
 * two real sandboxes, a profile registered at the first, and commands pointed at the second.
 */
const ADMIN = 'binding-admin';
let home: ServeProcess;
let other: ServeProcess;
let dir: string;
let homeKey: string;

beforeAll(async () => {
  const options = ['--admin-token', ADMIN, '--log-level', 'warn', '--rate-limit', 'off'];
  [home, other] = await Promise.all([startServe(options), startServe(options)]);
  dir = mkdtempSync(join(tmpdir(), 'agentctl-binding-'));
  const { account, apiKey } = await registerOver(home.url, 'Bound Agent');
  homeKey = apiKey;
  // The other sandbox has keys of its own: a key it did not issue is refused (401).
  await registerOver(other.url, 'Other Agent');
  await openConfig({ AGENTCTL_CONFIG_DIR: dir }).set('default', {
    base_url: home.url,
    api_key: apiKey,
    wallet_address: account.address,
  });
}, 60_000);
afterAll(async () => {
  for (const serve of [home, other]) serve.child.kill('SIGTERM');
  await Promise.all([home.exited, other.exited]);
  rmSync(dir, { recursive: true, force: true });
});

const cli = (args: string[], env: NodeJS.ProcessEnv = {}) =>
  runCli(args, { AGENTCTL_CONFIG_DIR: dir, ...env });

const WITHHELD = /not sending the API key of profile "default" to http:\/\/127\.0\.0\.1:\d+/;

describe("the profile's API key goes only to the service that issued it", () => {
  it('is withheld from another --base-url, with a notice, and the public read works', async () => {
    const result = await cli(['--base-url', other.url, 'data', 'vaults']);
    expect(result.stderr).toMatch(WITHHELD);
    expect(result.stderr).toContain(`it was issued for ${home.url}`);
    expect(result.code).toBe(0);
    expect(result.stdout).toContain('moderate');
  });

  it('is withheld with --json too: the notice on stderr, stdout only the body', async () => {
    const result = await cli(['--json', '--base-url', other.url, 'data', 'vaults']);
    expect(result.code).toBe(0);
    expect(result.stderr).toMatch(WITHHELD);
    expect(JSON.parse(result.stdout)).toHaveProperty('vaults');
  });

  it('is withheld from api graphql at another URL', async () => {
    const result = await cli([
      '--base-url',
      other.url,
      'api',
      'graphql',
      '--query',
      '{ vaults { name } }',
    ]);
    expect(result.stderr).toMatch(WITHHELD);
    expect(result.code).toBe(0);
  });

  it('is withheld from watch at another URL: it subscribes publicly rather than fail', async () => {
    const child = spawn(
      process.execPath,
      [BIN, '--base-url', other.url, 'watch', 'transactions', '--count', '1'],
      {
        env: {
          ...Object.fromEntries(
            Object.entries(process.env).filter(([key]) => !key.startsWith('AGENTCTL_')),
          ),
          AGENTCTL_CONFIG_DIR: dir,
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let stderr = '';
    child.stderr.on('data', (chunk) => {
      stderr += chunk;
    });
    let code: number | null | undefined;
    const exited = new Promise<void>((resolve) =>
      child.on('close', (exit) => {
        code = exit;
        resolve();
      }),
    );
    const subscriptions = async () =>
      (await requestOver(other.url, ADMIN, 'GET', '/sandbox/info')).body.graphql.subscriptions;
    await until(async () => code !== undefined || (await subscriptions()) === 1, 20_000);
    expect(stderr).toMatch(WITHHELD);
    expect(code).toBeUndefined();
    child.kill('SIGINT');
    await exited;
  });

  it('a command that needs the key says why there is none', async () => {
    const result = await cli(['--base-url', other.url, 'wallet']);
    expect(result.code).toBe(4);
    expect(result.stderr).toContain(`issued for ${home.url}`);
    expect(result.stderr).toContain('--api-key');
  });

  it("is sent to the profile's own service", async () => {
    const result = await cli(['--json', 'wallet']);
    expect(result.code).toBe(0);
    expect(result.stderr).not.toMatch(WITHHELD);
  });

  it('an explicit --api-key or AGENTCTL_API_KEY is always sent', async () => {
    const byFlag = await cli(['--base-url', other.url, '--api-key', homeKey, 'wallet']);
    expect(byFlag.code).toBe(4); // the other sandbox does not know it: it was sent
    expect(byFlag.stderr).not.toMatch(WITHHELD);
    const byEnv = await cli(['--base-url', other.url, 'wallet'], { AGENTCTL_API_KEY: homeKey });
    expect(byEnv.code).toBe(4);
    expect(byEnv.stderr).not.toMatch(WITHHELD);
  });
});
