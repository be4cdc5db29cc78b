import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { run as start } from '../../../src/cli/commands/serve/start.ts';
import { run as status } from '../../../src/cli/commands/serve/status.ts';
import { run as stop } from '../../../src/cli/commands/serve/stop.ts';
import { EXIT } from '../../../src/cli/exit-codes.ts';
import { capturedContext } from '../../helpers/run-context.ts';

/** serve's subcommands on a state directory no sandbox runs on, and serve's own refusals. */
const dir = mkdtempSync(join(tmpdir(), 'agentctl-serve-control-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const context = (json = false) =>
  capturedContext({ json }, { AGENTCTL_CONFIG_DIR: join(dir, 'config') });

describe('on a state directory no sandbox runs on', () => {
  const state = join(dir, 'idle');

  it('serve stop says so, and is no error', async () => {
    const human = context();
    await stop({ state }, human.context);
    expect(human.text.stderr).toBe(`no sandbox is running on ${state}\n`);
    const json = context(true);
    await stop({ state }, json.context);
    expect(JSON.parse(json.text.stdout)).toEqual({ state, running: false, stopped: false });
  });

  it('serve status says not running, and exits 1', async () => {
    const human = context();
    await expect(status({ state }, human.context)).rejects.toMatchObject({
      exitCode: EXIT.failure,
    });
    expect(human.text.stdout).toBe(`not running (state ${state})\n`);
    const json = context(true);
    await expect(status({ state }, json.context)).rejects.toMatchObject({
      exitCode: EXIT.failure,
    });
    expect(JSON.parse(json.text.stdout)).toMatchObject({ state, running: false, health: null });
  });
});

describe('serve', () => {
  it('refuses an empty admin token before starting anything', async () => {
    const { context: ctx, text } = context();
    await expect(
      start(
        {
          host: '127.0.0.1',
          port: 0,
          state: join(dir, 'never'),
          adminToken: ' ',
          rateLimit: true,
          trustProxy: false,
          logLevel: 'info',
          logFormat: 'json',
          maxConnections: 10,
          requestTimeoutMs: 1000,
          detach: false,
          argv: [],
        },
        ctx,
      ),
    ).rejects.toMatchObject({ exitCode: EXIT.usage, message: expect.stringContaining('is empty') });
    expect(text.stdout).toBe('');
  });
});
