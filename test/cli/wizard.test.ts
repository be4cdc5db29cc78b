import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BIN, registerOver, type ServeProcess, startServe } from '../helpers/serve.ts';

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
      // Key by key, as typed: a control key inside a chunk would be read as text.
      for (const key of keys) {
        child.stdin.write(key);
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
    },
  };
}

/**
 * What a terminal shows once `raw` has been written to it: the cursor moves and erasures
 * inquirer uses (up, down, column, erase line) are applied; other escapes are dropped.
 */
function visibleScreen(raw: string): string[] {
  const lines: string[] = [''];
  let row = 0;
  let column = 0;
  const put = (char: string) => {
    const line = (lines[row] ?? '').padEnd(column, ' ');
    lines[row] = line.slice(0, column) + char + line.slice(column + 1);
    column += 1;
  };
  // biome-ignore lint/suspicious/noControlCharactersInRegex: terminal escapes
  const tokens = raw.match(/\u001b\[[?\d;]*[A-Za-z]|\u001b.|[\s\S]/g) ?? [];
  for (const token of tokens) {
    // biome-ignore lint/suspicious/noControlCharactersInRegex: terminal escapes
    const control = /^\u001b\[([?\d;]*)([A-Za-z])$/.exec(token);
    if (control) {
      const n = Number(control[1] || 1);
      if (control[2] === 'A') row = Math.max(0, row - n);
      else if (control[2] === 'B') row += n;
      else if (control[2] === 'G') column = n - 1;
      else if (control[2] === 'K')
        lines[row] = control[1] === '2' ? '' : (lines[row] ?? '').slice(0, column);
      while (lines.length <= row) lines.push('');
    } else if (token === '\r') column = 0;
    else if (token === '\n') {
      row += 1;
      while (lines.length <= row) lines.push('');
    } else if (!token.startsWith('\u001b')) put(token);
  }
  return lines.map((line) => line.trimEnd());
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
    await run.answer('Register Wizard Bot with wallet', '\r');
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
    await run.answer('Register Never with wallet', 'n\r');
    expect(await run.exited).toBe(130);
    const lookup = await (
      await fetch(
        `${sandbox.url}/api/v1/agent/auth/lookup?wallet=${privateKeyToAccount(key).address}`,
      )
    ).json();
    expect(lookup).toEqual({ registered: false });
  }, 60_000);

  it('checks each answer at its prompt, asks again, and defaults the operator to the signer', async () => {
    const config = mkdtempSync(join(dir, 'checks-'));
    const run = onTerminal(['--base-url', sandbox.url, 'register'], {
      AGENTCTL_CONFIG_DIR: config,
      AGENTCTL_PRIVATE_KEY: undefined,
      AGENTCTL_KEYSTORE_PASSWORD: undefined,
    });
    await run.answer('Which key signs the registration?', '\r'); // Create a new key
    await run.answer('Name for the new key', 'wiz key!\r');
    await run.answer('use letters, digits', 'wizkey\r');
    await run.answer('New keystore password', 'correct horse battery\r');
    await run.answer('Repeat the password', 'correct horse battery\r');
    await run.answer('Agent name', 'ab\r');
    await run.answer('must be 3 to 100 characters', 'Checked Bot\r');
    await run.answer('Agent type', '\r');
    await run.answer('Description', '\r');
    // The operator's default is the new key's address: Enter takes it.
    await run.answer('Operator address', '\r');
    await run.answer('Operator e-mail', 'not-an-email\r');
    await run.answer('must be an e-mail address', 'ops@example.org\r');
    await run.answer('Operator name', '\r');
    await run.answer('Framework', '\r');
    await run.answer('Public repository URL', 'ftp://x\r');
    await run.answer('must be an http or https URL', '\r');
    await run.answer('Register Checked Bot with wallet', '\r');
    expect(await run.exited).toBe(0);
    expect(run.screen()).not.toMatch(/KeystoreError|\n\s+at /);
    // scrypt's second or two is not silent: a spinner says what is happening.
    expect(run.screen()).toContain('encrypting the new key');
    const stored = JSON.parse(readFileSync(join(config, 'config.json'), 'utf8'));
    expect(stored.profiles.default).toMatchObject({ keystore: 'wizkey' });
    expect(run.screen()).toContain(`(${stored.profiles.default.wallet_address})`);
  }, 90_000);

  it('leaves no error on the screen once a refused answer gives way to the default', async () => {
    const key = generatePrivateKey();
    const run = onTerminal(
      ['--base-url', sandbox.url, 'register', '--name', 'Default Bot', '--yes'],
      { AGENTCTL_CONFIG_DIR: mkdtempSync(join(dir, 'stale-')), AGENTCTL_PRIVATE_KEY: key },
    );
    // A wrong checksum is refused; Enter on the emptied answer then takes the default.
    await run.answer('Operator address', '0x000000000000000000000000000000000000DEaD\r');
    await run.answer('has an invalid EIP-55 checksum', '\r');
    expect(await run.exited).toBe(0);
    const screen = visibleScreen(run.screen());
    expect(screen.join('\n')).toContain('registered Default Bot');
    expect(screen.join('\n')).not.toContain('EIP-55');
    // The accepted answer is the signer's address, and the registration follows at once.
    const answered = screen.findIndex((line) => line.includes('Operator address'));
    expect(screen.slice(answered).join('')).toContain(privateKeyToAccount(key).address);
    expect(screen[answered + 2]).toMatch(/^registered Default Bot/);
  }, 60_000);

  it('asks again after a wrong keystore password, up to 3 times', async () => {
    const config = mkdtempSync(join(dir, 'password-'));
    const passwordFile = join(config, 'pw');
    writeFileSync(passwordFile, 'correct horse battery\n');
    const made = spawnSync(
      process.execPath,
      [BIN, 'keys', 'new', 'signer', '--password-file', passwordFile],
      { env: { ...process.env, AGENTCTL_CONFIG_DIR: config } },
    );
    expect(made.status).toBe(0);
    const run = onTerminal(
      ['--base-url', sandbox.url, 'register', '--key', 'signer', '--name', 'Retry Bot', '--yes'],
      { AGENTCTL_CONFIG_DIR: config, AGENTCTL_PRIVATE_KEY: undefined },
    );
    await run.answer('Password for key signer', 'wrong one\r');
    await run.answer('Wrong password for key signer; try again', '');
    await run.answer('Password for key signer', 'correct horse battery\r');
    await run.answer('Operator address', '\r');
    expect(await run.exited).toBe(0);
    expect(run.screen()).toContain('registered Retry Bot');
    expect(run.screen()).toContain('unlocking key signer');

    // Three wrong answers end it, with exit 4.
    const failing = onTerminal(
      [
        '--base-url',
        sandbox.url,
        '--profile',
        'other',
        'register',
        '--key',
        'signer',
        '--name',
        'X Bot',
      ],
      { AGENTCTL_CONFIG_DIR: config, AGENTCTL_PRIVATE_KEY: undefined },
    );
    for (let attempt = 1; attempt <= 3; attempt++) {
      await failing.answer('Password for key signer', 'nope\r');
      if (attempt < 3) await failing.answer('try again', '');
    }
    expect(await failing.exited).toBe(4);
  }, 90_000);

  it('says a wallet is already registered before asking anything else', async () => {
    const key = generatePrivateKey();
    const first = onTerminal(
      ['--base-url', sandbox.url, 'register', '--name', 'Only Once', '--yes'],
      { AGENTCTL_CONFIG_DIR: mkdtempSync(join(dir, 'once-')), AGENTCTL_PRIVATE_KEY: key },
    );
    await first.answer('Operator address', '\r');
    expect(await first.exited).toBe(0);
    const again = onTerminal(['--base-url', sandbox.url, 'register'], {
      AGENTCTL_CONFIG_DIR: mkdtempSync(join(dir, 'twice-')),
      AGENTCTL_PRIVATE_KEY: key,
    });
    expect(await again.exited).toBe(2);
    expect(again.screen()).toContain('is already registered, as Only Once');
    expect(again.screen()).not.toContain('Agent name');
  }, 60_000);

  it('deposit on a terminal asks first, naming wallet, service and profile, then shows a spinner', async () => {
    const { apiKey } = await registerOver(sandbox.url, 'Terminal Depositor');
    const env = {
      AGENTCTL_CONFIG_DIR: mkdtempSync(join(dir, 'deposit-')),
      AGENTCTL_API_KEY: apiKey,
    };
    const declined = onTerminal(['--base-url', sandbox.url, 'deposit', 'moderate', '2'], env);
    await declined.answer('(y/N)', 'n\r');
    expect(await declined.exited).toBe(130);
    expect(declined.screen()).toMatch(
      /Deposit 2 USDC into moderate from 0x[0-9a-fA-F]{4}…[0-9a-fA-F]{4}/,
    );

    const run = onTerminal(['--base-url', sandbox.url, 'deposit', 'moderate', '2'], env);
    await run.answer('(y/N)', 'y\r');
    expect(await run.exited).toBe(0);
    expect(run.screen()).toContain('waiting for approve and deposit to confirm');
    expect(run.screen()).toMatch(/deposited 2 USDC \(2000000 raw\) into/);
    // Only the accepted deposit happened.
    const positions = await (
      await fetch(`${sandbox.url}/api/v1/agent/vault/positions`, {
        headers: { 'x-api-key': apiKey },
      })
    ).json();
    expect(JSON.stringify(positions)).toContain('"shares":"2"');
  }, 60_000);
});
