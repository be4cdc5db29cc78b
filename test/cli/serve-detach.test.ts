import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { anvilsStartedFor } from '../../src/sandbox/chain/anvil.ts';
import { runCli } from '../helpers/cli.ts';

const dir = mkdtempSync(join(tmpdir(), 'agentctl-detach-'));
const state = join(dir, 'state');
const env = { AGENTCTL_CONFIG_DIR: join(dir, 'config'), AGENTCTL_ADMIN_TOKEN: 'detach-admin' };

afterAll(async () => {
  await runCli(['serve', 'stop', '--state', state], env);
  rmSync(dir, { recursive: true, force: true });
});

describe('a sandbox in the background', () => {
  it('serve --detach starts it, status finds it, logs show it, and stop ends it with its anvil', async () => {
    const started = await runCli(['serve', '--port', '0', '--state', state, '--detach'], env);
    expect(started.code).toBe(0);
    const url = /listening on (http:\/\/\S+)/.exec(started.stdout)?.[1];
    expect(url).toBeDefined();
    expect(started.stdout).toContain(`agentctl serve stop --state ${state}`);
    // The command returned, and the sandbox still answers.
    expect((await fetch(`${url}/health`)).status).toBe(200);

    const status = await runCli(['--json', 'serve', 'status', '--state', state], env);
    expect(status.code).toBe(0);
    expect(JSON.parse(status.stdout)).toMatchObject({ running: true, url, health: 'ok' });

    const twice = await runCli(['serve', '--port', '0', '--state', state, '--detach'], env);
    expect(twice.code).toBe(1);
    expect(twice.stderr).toContain('already running');

    const logs = await runCli(['serve', 'logs', '--state', state], env);
    expect(logs.stdout).toContain('"url":"/health"');
    const last = await runCli(['serve', 'logs', '--state', state, '-n', '1'], env);
    expect(last.stdout.trim().split('\n')).toHaveLength(1);

    const stopped = await runCli(['serve', 'stop', '--state', state], env);
    expect(stopped.code).toBe(0);
    expect(stopped.stderr).toContain('stopped the sandbox');
    expect(anvilsStartedFor(state)).toEqual([]);
    await expect(fetch(`${url}/health`)).rejects.toThrow();
    const after = await runCli(['serve', 'status', '--state', state], env);
    expect(after.code).toBe(1);
    expect(after.stdout).toContain('not running');
    // Stopping what is not running is not an error.
    expect((await runCli(['serve', 'stop', '--state', state], env)).code).toBe(0);
  }, 60_000);

  it('says why a detached serve did not start', async () => {
    const file = join(dir, 'not-a-dir');
    const failed = await runCli(
      [
        'serve',
        '--port',
        '0',
        '--state',
        join(file, 'x'),
        '--rpc-url',
        'http://127.0.0.1:1',
        '--detach',
      ],
      env,
    );
    expect(failed.code).toBe(1);
    expect(failed.stderr).toContain('serve did not start');
  }, 60_000);
});
