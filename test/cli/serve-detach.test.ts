import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { anvilsStartedFor } from '../../src/sandbox/chain/anvil.ts';
import { runCli } from '../helpers/cli.ts';

const dir = mkdtempSync(join(tmpdir(), 'agentctl-detach-'));
const state = join(dir, 'state');
const env = { AGENTCTL_CONFIG_DIR: join(dir, 'config'), AGENTCTL_ADMIN_TOKEN: 'detach-admin' };

const secretState = join(dir, 'secret-state');
const noTokenEnv = { AGENTCTL_CONFIG_DIR: join(dir, 'config') };

afterAll(async () => {
  await runCli(['serve', 'stop', '--state', state], env);
  await runCli(['serve', 'stop', '--state', secretState], noTokenEnv);
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
    // Started by the command line, it is known to honour Idempotency-Key from its first write.
    const config = JSON.parse(readFileSync(join(dir, 'config', 'config.json'), 'utf8'));
    expect(config.idempotency_key_services).toEqual([url]);

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

  it('prints a generated admin token once, and never writes it to disk or shows it in serve logs', async () => {
    const started = await runCli(
      ['serve', '--port', '0', '--state', secretState, '--detach'],
      noTokenEnv,
    );
    expect(started.code, started.stderr).toBe(0);
    const token = /^admin token: (\S+)$/m.exec(started.stdout)?.[1];
    expect(token, started.stdout).toBeDefined();
    expect(token).not.toBe('shown');
    const url = /listening on (http:\/\/\S+)/.exec(started.stdout)?.[1];
    // The token printed is the one that works.
    const info = await fetch(`${url}/sandbox/info`, {
      headers: { 'x-admin-token': token as string },
    });
    expect(info.status).toBe(200);

    const onDisk = filesUnder(secretState).filter((file) =>
      readFileSync(file).includes(token as string),
    );
    expect(onDisk).toEqual([]);
    const log = readFileSync(join(secretState, 'serve.log'), 'utf8');
    expect(log).toContain('admin token: shown once at start, not logged');

    for (const args of [[], ['--json'], ['--format', 'human'], ['--format', 'json']]) {
      const json = args[0] === '--json';
      const logs = await runCli(
        [
          ...(json ? ['--json'] : []),
          'serve',
          'logs',
          '--state',
          secretState,
          ...(json ? [] : args),
        ],
        noTokenEnv,
      );
      expect(logs.code).toBe(0);
      expect(logs.stdout).not.toContain(token);
      expect(logs.stdout).toContain('shown once at start, not logged');
    }
  }, 60_000);

  it('serve logs in JSON is JSON on every line, the ready block included', async () => {
    for (const args of [
      ['--json', 'serve', 'logs', '--state', secretState],
      ['serve', 'logs', '--state', secretState, '--format', 'json'],
    ]) {
      const logs = await runCli(args, noTokenEnv);
      const lines = logs.stdout.trim().split('\n');
      expect(lines.length).toBeGreaterThan(3);
      for (const line of lines) {
        const entry = JSON.parse(line);
        expect(typeof entry).toBe('object');
        expect(typeof entry.msg).toBe('string');
      }
      expect(lines.map((line) => JSON.parse(line).msg)).toContain(
        'admin token: shown once at start, not logged',
      );
    }
  }, 60_000);
});

/** Every file under `root`, at any depth. */
function filesUnder(root: string): string[] {
  return readdirSync(root, { recursive: true, encoding: 'utf8' })
    .map((name) => join(root, name))
    .filter((path) => statSync(path).isFile());
}
