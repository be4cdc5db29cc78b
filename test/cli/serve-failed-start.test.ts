import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../helpers/cli.ts';
import { startServe } from '../helpers/serve.ts';

/**
 * A first start on a new --state that fails (its port is taken) keeps no admin token: the
 * next start generates one and prints it, instead of pointing at a token never printed.
 */
const dir = mkdtempSync(join(tmpdir(), 'agentctl-failed-start-'));
const env = { AGENTCTL_CONFIG_DIR: join(dir, 'config') };
let taken: Server;
let takenPort: number;

beforeAll(async () => {
  taken = createServer();
  await new Promise<void>((done) => taken.listen(0, '127.0.0.1', done));
  takenPort = (taken.address() as { port: number }).port;
});

afterAll(async () => {
  await new Promise((done) => taken.close(done));
  rmSync(dir, { recursive: true, force: true });
});

describe('a first start that fails on a taken port', () => {
  it('in the foreground: the next start prints a new admin token that works', async () => {
    const state = join(dir, 'foreground');
    const failed = await runCli(['serve', '--port', String(takenPort), '--state', state], env);
    expect(failed.code).toBe(1);
    expect(failed.stderr).toContain(`port ${takenPort} on 127.0.0.1 is already in use`);

    const serve = await startServe(['--state', state]);
    try {
      const token = /^admin token: (\S+)$/m.exec(serve.stdout())?.[1];
      expect(token).toBeDefined();
      const info = await fetch(`${serve.url}/sandbox/info`, {
        headers: { 'x-admin-token': token as string },
      });
      expect(info.status).toBe(200);
    } finally {
      serve.child.kill('SIGTERM');
      await serve.exited;
    }
  }, 60_000);

  it('detached: the next start prints a new admin token that works', async () => {
    const state = join(dir, 'detached');
    const failed = await runCli(
      ['serve', '--port', String(takenPort), '--state', state, '--detach'],
      env,
    );
    expect(failed.code).toBe(1);
    expect(failed.stderr).toContain('serve did not start');
    expect(failed.stderr).toContain(`port ${takenPort} on 127.0.0.1 is already in use`);

    const started = await runCli(['serve', '--port', '0', '--state', state, '--detach'], env);
    try {
      expect(started.code).toBe(0);
      const token = /^admin token: (\S+)$/m.exec(started.stdout)?.[1];
      expect(token).toBeDefined();
      const url = /listening on (http:\/\/\S+)/.exec(started.stdout)?.[1];
      const info = await fetch(`${url}/sandbox/info`, {
        headers: { 'x-admin-token': token as string },
      });
      expect(info.status).toBe(200);
    } finally {
      await runCli(['serve', 'stop', '--state', state], env);
    }
  }, 60_000);
});
