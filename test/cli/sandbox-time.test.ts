import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli, spawnCli as spawnAgentctl } from '../helpers/cli.ts';
import {
  registerOver,
  requestOver,
  type ServeProcess,
  startServe,
  until,
} from '../helpers/serve.ts';

/**
 * Times the command line shows against a sandbox whose clock runs ahead of the wall clock
 * (`sandbox advance`): relative hints count from the sandbox's clock, and `watch` stamps its
 * lines with the block's time, never the local clock.
 */

const ADMIN = 'sandbox-time-admin';
const DAY = 86_400;
let sandbox: ServeProcess;
let dir: string;
let apiKey: string;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'agentctl-sandbox-time-'));
  sandbox = await startServe([
    '--admin-token',
    ADMIN,
    '--log-level',
    'warn',
    '--rate-limit',
    'off',
  ]);
  ({ apiKey } = await registerOver(sandbox.url, 'Clockwise Agent'));
  const advanced = await requestOver(sandbox.url, ADMIN, 'POST', '/sandbox/clock/advance', {
    seconds: DAY,
  });
  expect(advanced.status).toBe(200);
});
afterAll(async () => {
  sandbox.child.kill('SIGTERM');
  await sandbox.exited;
  rmSync(dir, { recursive: true, force: true });
});

const env = () => ({
  AGENTCTL_CONFIG_DIR: dir,
  AGENTCTL_BASE_URL: sandbox.url,
  AGENTCTL_API_KEY: apiKey,
});

/** The built agentctl in the background, against this test's sandbox. */
const spawnCli = (args: string[]) => spawnAgentctl(args, env());

/** Open subscriptions, as /sandbox/info counts them. */
async function subscriptions(): Promise<number> {
  const info = await requestOver(sandbox.url, ADMIN, 'GET', '/sandbox/info');
  return info.body.graphql.subscriptions;
}

describe('against a sandbox a day ahead of the wall clock', () => {
  it('strategy list says a strategy submitted a second ago was, not that it will be in 24 h', async () => {
    const submit = await runCli(
      [
        'strategy',
        'submit',
        '--name',
        'Clockwise',
        '--description',
        'Submitted after the clock moved.',
      ],
      env(),
    );
    expect(submit.stderr).toBe('');
    expect(submit.code).toBe(0);
    const list = await runCli(['strategy', 'list'], env());
    expect(list.code).toBe(0);
    expect(list.stdout).toContain('Clockwise');
    expect(list.stdout).not.toMatch(/\(in \d+/);
    expect(list.stdout).toMatch(/\((now|\d+ s ago)\)/);
  });

  it("watch vault stamps its lines, and its --json events, with the block's time", async () => {
    const before = await subscriptions();
    const human = spawnCli(['watch', 'vault', 'moderate', '--count', '1']);
    const json = spawnCli(['--json', 'watch', 'vault', 'moderate', '--count', '1']);
    await until(async () => (await subscriptions()) >= before + 2);
    // A person is told it is listening before anything happens (stderr; stdout stays data).
    await until(() => human.stderr().includes('waiting for the next change to vault'));
    expect(human.stdout()).toBe('');
    expect(json.stderr()).toBe('');

    const deposit = await requestOver(
      sandbox.url,
      '',
      'POST',
      '/api/v1/agent/vault/deposit',
      { vault_id: 'moderate', amount_usdc: 5 },
      apiKey,
    );
    expect(deposit.status).toBe(200);
    expect(await human.exited).toBe(0);
    expect(await json.exited).toBe(0);

    const answer = await requestOver(sandbox.url, '', 'POST', '/graphql', {
      query: `{ userTransactions(address: "${deposit.body.agent_address}") { hash timestamp } }`,
    });
    const blockTime = answer.body.data.userTransactions.find(
      (tx: { hash: string }) => tx.hash === deposit.body.deposit_tx,
    ).timestamp as string;
    // The block's time is a day ahead of the wall clock: the local clock could not give it.
    expect(Date.parse(blockTime)).toBeGreaterThan(Date.now() + DAY * 1000 - 3_600_000);
    expect(JSON.parse(json.stdout()).updatedAt).toBe(blockTime);
    expect(human.stdout()).toMatch(new RegExp(`^${blockTime} {2}tvl \\d`));
  });
});
