import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BIN, type ServeProcess, startServe } from '../helpers/serve.ts';

let sandbox: ServeProcess;
let dir: string;
beforeAll(async () => {
  sandbox = await startServe(['--admin-token', 'wizard-admin', '--log-level', 'warn']);
  dir = mkdtempSync(join(tmpdir(), 'agentctl-wizard-'));
});
afterAll(async () => {
  sandbox.child.kill('SIGTERM');
  await sandbox.exited;
  rmSync(dir, { recursive: true, force: true });
});

/**
 * Runs agentctl on a real pseudo-terminal (util-linux `script`), so the wizard's prompts
 * appear, and answers each prompt once its text shows up.
 */
function onTerminal(args: string[], env: NodeJS.ProcessEnv) {
  const command = [process.execPath, BIN, ...args]
    .map((part) => `'${part.replace(/'/g, "'\\''")}'`)
    .join(' ');
  const { CI: _ci, ...rest } = process.env;
  const child = spawn('script', ['-qfec', command, '/dev/null'], {
    env: { ...rest, ...env, TERM: 'dumb', NO_COLOR: '1' },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let screen = '';
  child.stdout.on('data', (chunk) => {
    screen += chunk;
  });
  const exited = new Promise<number | null>((resolve) =>
    child.on('close', (code) => resolve(code)),
  );
  let seen = 0;
  return {
    exited,
    screen: () => screen,
    /** Waits for `prompt` to appear after the previous one, then types `keys`. */
    async answer(prompt: string, keys: string) {
      const deadline = Date.now() + 20_000;
      for (;;) {
        const at = screen.indexOf(prompt, seen);
        if (at >= 0) {
          seen = at + prompt.length;
          break;
        }
        if (Date.now() > deadline) throw new Error(`no prompt "${prompt}" in:\n${screen}`);
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      await new Promise((resolve) => setTimeout(resolve, 100));
      child.stdin.write(keys);
    },
  };
}

describe('the registration wizard', () => {
  it('asks for every field, registers, and stores the API key', async () => {
    const key = generatePrivateKey();
    const run = onTerminal(['--base-url', sandbox.url, 'register'], {
      AGENTCTL_CONFIG_DIR: dir,
      AGENTCTL_PRIVATE_KEY: key,
    });
    await run.answer('Agent name', 'Wizard Bot\r');
    await run.answer('Agent type', '\u001b[A\r'); // one up from the default, custom: analytics
    await run.answer('Description', 'Made by the wizard\r');
    await run.answer('Operator address', '0x000000000000000000000000000000000000dEaD\r');
    await run.answer('Operator e-mail', 'ops@example.org\r');
    await run.answer('Operator name', '\r');
    await run.answer('Framework', 'eliza\r');
    await run.answer('Public repository URL', '\r');
    await run.answer('Register Wizard Bot?', '\r');
    expect(await run.exited).toBe(0);
    expect(run.screen()).toContain('registered Wizard Bot');
    const config = JSON.parse(readFileSync(join(dir, 'config.json'), 'utf8'));
    expect(config.profiles.default.wallet_address).toBe(privateKeyToAccount(key).address);
    expect(config.profiles.default.api_key).toMatch(/^agk_/);
    const lookup = await (
      await fetch(
        `${sandbox.url}/api/v1/agent/auth/lookup?wallet=${privateKeyToAccount(key).address}`,
      )
    ).json();
    expect(lookup).toMatchObject({ registered: true, agent_name: 'Wizard Bot' });
    expect(run.screen()).not.toContain(key.slice(2));
  }, 60_000);

  it('exits 130 when the user says no at the end, and registers nothing', async () => {
    const key = generatePrivateKey();
    const run = onTerminal(
      [
        '--base-url',
        sandbox.url,
        'register',
        '--name',
        'Never',
        '--operator',
        '0x000000000000000000000000000000000000dEaD',
        '--type',
        'custom',
        '--description',
        '',
        '--operator-email',
        '',
        '--operator-name',
        '',
        '--framework',
        '',
        '--repo-url',
        '',
      ],
      { AGENTCTL_CONFIG_DIR: mkdtempSync(join(dir, 'no-')), AGENTCTL_PRIVATE_KEY: key },
    );
    await run.answer('Register Never?', 'n\r');
    expect(await run.exited).toBe(130);
    const lookup = await (
      await fetch(
        `${sandbox.url}/api/v1/agent/auth/lookup?wallet=${privateKeyToAccount(key).address}`,
      )
    ).json();
    expect(lookup).toEqual({ registered: false });
  }, 60_000);
});
