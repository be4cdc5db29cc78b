import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { decryptKeystoreJson } from 'ethers';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../helpers/cli.ts';
import { type ServeProcess, startServe } from '../helpers/serve.ts';

const PASSWORD = 'correct horse battery';
const OPERATOR = '0x000000000000000000000000000000000000dEaD';
let sandbox: ServeProcess;
let root: string;
let passwordFile: string;

beforeAll(async () => {
  sandbox = await startServe([
    '--admin-token',
    'keys-admin',
    '--log-level',
    'warn',
    '--rate-limit',
    'off',
  ]);
  root = mkdtempSync(join(tmpdir(), 'agentctl-keys-'));
  passwordFile = join(root, 'password.txt');
  writeFileSync(passwordFile, `${PASSWORD}\n`);
});
afterAll(async () => {
  sandbox.child.kill('SIGTERM');
  await sandbox.exited;
  rmSync(root, { recursive: true, force: true });
});

/** A fresh config dir per test, against the shared sandbox. */
function freshCli() {
  const dir = mkdtempSync(join(root, 'config-'));
  const cli = (args: string[], env: NodeJS.ProcessEnv = {}) =>
    runCli(args, { AGENTCTL_CONFIG_DIR: dir, AGENTCTL_BASE_URL: sandbox.url, ...env });
  return { dir, cli };
}

describe('agentctl keys', () => {
  it('creates a v3 keystore (0600, in a 0700 dir) that another implementation decrypts', async () => {
    const { dir, cli } = freshCli();
    const created = await cli(['--json', 'keys', 'new', 'trader', '--password-file', passwordFile]);
    expect(created.code).toBe(0);
    const entry = JSON.parse(created.stdout);
    expect(entry).toEqual({
      name: 'trader',
      address: expect.stringMatching(/^0x[0-9a-fA-F]{40}$/),
      path: join(dir, 'keystores', 'trader.json'),
    });
    expect(statSync(entry.path).mode & 0o777).toBe(0o600);
    expect(statSync(join(dir, 'keystores')).mode & 0o777).toBe(0o700);
    const json = readFileSync(entry.path, 'utf8');
    expect(JSON.parse(json)).toMatchObject({ version: 3, crypto: { kdf: 'scrypt' } });
    // ethers' own Web3 Secret Storage code reads it back to the same address.
    const decrypted = await decryptKeystoreJson(json, PASSWORD);
    // EIP-55 checksummed, as everywhere else.
    expect(decrypted.address).toBe(entry.address);
    expect(created.stdout + created.stderr).not.toContain(decrypted.privateKey.slice(2));
  }, 60_000);

  it('never overwrites a key, and lists, addresses and removes', async () => {
    const { cli } = freshCli();
    const env = { AGENTCTL_KEYSTORE_PASSWORD: PASSWORD };
    expect((await cli(['keys', 'new', 'a'], env)).code).toBe(0);
    const again = await cli(['keys', 'new', 'a'], env);
    expect(again.code).toBe(2);
    expect(again.stderr).toContain('a key named a already exists');
    const list = JSON.parse((await cli(['--json', 'keys', 'list'])).stdout);
    expect(list.map((k: { name: string }) => k.name)).toEqual(['a']);
    const address = await cli(['keys', 'address', 'a']);
    expect(address.stdout.trim()).toBe(list[0].address);
    const noYes = await cli(['keys', 'remove', 'a']);
    expect(noYes.code).toBe(2);
    expect(noYes.stderr).toContain('pass --yes');
    expect((await cli(['keys', 'remove', 'a', '--yes'])).code).toBe(0);
    expect((await cli(['keys', 'address', 'a'])).code).toBe(2);
    expect((await cli(['keys', 'new', '../escape'], env)).code).toBe(2);
  }, 60_000);

  it('imports a key from a file, and never prints it', async () => {
    const { cli } = freshCli();
    const key = generatePrivateKey();
    const keyFile = join(root, 'key.txt');
    writeFileSync(keyFile, `${key}\n`);
    const imported = await cli([
      '--json',
      'keys',
      'import',
      'mine',
      '--private-key-file',
      keyFile,
      '--password-file',
      passwordFile,
    ]);
    expect(imported.code).toBe(0);
    expect(JSON.parse(imported.stdout).address).toBe(privateKeyToAccount(key).address);
    expect(imported.stdout + imported.stderr).not.toContain(key.slice(2));
  }, 60_000);

  it('refuses a weak or missing password without a terminal, never hanging', async () => {
    const { cli } = freshCli();
    const none = await cli(['keys', 'new', 'x']);
    expect(none.code).toBe(2);
    expect(none.stderr).toContain('--password-file FILE, set AGENTCTL_KEYSTORE_PASSWORD');
    const weak = await cli(['keys', 'new', 'x'], { AGENTCTL_KEYSTORE_PASSWORD: 'short' });
    expect(weak.code).toBe(2);
  });
});

describe('agentctl register (scripted)', () => {
  it('registers with a keystore, stores the key in a 0600 profile, and whoami finds it', async () => {
    const { dir, cli } = freshCli();
    await cli(['keys', 'new', 'bot', '--password-file', passwordFile]);
    const registered = await cli(
      [
        '--json',
        'register',
        '--key',
        'bot',
        '--name',
        'Trend Bot',
        '--operator',
        OPERATOR,
        '--type',
        'trading',
      ],
      { AGENTCTL_KEYSTORE_PASSWORD: PASSWORD },
    );
    expect(registered.code).toBe(0);
    const body = JSON.parse(registered.stdout);
    expect(body).toMatchObject({ success: true, agent_name: 'Trend Bot', tier: 'unverified' });
    expect(body.api_key).toMatch(/^agk_/);
    expect(registered.stderr).toBe('');
    const config = JSON.parse(readFileSync(join(dir, 'config.json'), 'utf8'));
    expect(config.profiles.default).toMatchObject({
      api_key: body.api_key,
      keystore: 'bot',
      base_url: sandbox.url,
    });
    expect(statSync(join(dir, 'config.json')).mode & 0o777).toBe(0o600);

    const human = await cli(['whoami']);
    expect(human.code).toBe(0);
    expect(human.stdout).toMatch(/^agent_name\s+Trend Bot$/m);
    // Both wallets, and which does what.
    expect(human.stdout).toMatch(
      /^wallet\s+0x[0-9a-fA-F]{40} \(registered;\s+signs the registration\)$/m,
    );
    expect(human.stdout).toMatch(/^agent_wallet\s+0x[0-9a-fA-F]{40} \(server-side;\s+deposits/m);
    // The stored key works for authenticated commands.
    expect((await cli(['wallet'])).code).toBe(0);
  }, 60_000);

  it('registers with AGENTCTL_PRIVATE_KEY, says where the key went, and never prints the private key', async () => {
    const { cli } = freshCli();
    const key = generatePrivateKey();
    const result = await cli(['register', '--name', 'CI Bot', '--operator', OPERATOR], {
      AGENTCTL_PRIVATE_KEY: key,
    });
    expect(result.code).toBe(0);
    expect(result.stdout).toContain(`registered CI Bot (${privateKeyToAccount(key).address})`);
    expect(result.stdout).toMatch(/its server-side wallet is 0x[0-9a-fA-F]{40}/);
    expect(result.stderr).toMatch(
      /API key agk_[0-9a-f]{8}… stored in profile "default" \(.*config\.json\)/,
    );
    expect(result.stdout + result.stderr).not.toContain(key.slice(2));
  });

  it('names every missing flag, and every signer option, with exit 2', async () => {
    const { cli } = freshCli();
    const missing = await cli(['register']);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toBe('agentctl: missing --name\n');
    const noSigner = await cli(['register', '--name', 'Nobody', '--operator', OPERATOR]);
    expect(noSigner.code).toBe(2);
    expect(noSigner.stderr).toContain('--key NAME');
    expect(noSigner.stderr).toContain('AGENTCTL_PRIVATE_KEY');
    expect(noSigner.stderr).toContain('profile');
    const badField = await cli(
      ['register', '--name', 'ok name', '--operator', OPERATOR, '--repo-url', 'ftp://x'],
      {
        AGENTCTL_PRIVATE_KEY: generatePrivateKey(),
      },
    );
    expect(badField.code).toBe(2);
    expect(badField.stderr).toContain('--repo-url: must be an http or https URL');
    // Every bad flag at once, before any key is needed.
    const many = await cli([
      'register',
      '--name',
      'x',
      '--operator-email',
      'no',
      '--repo-url',
      'ftp://x',
    ]);
    expect(many.code).toBe(2);
    expect(many.stderr).toContain('--name: must be 3 to 100 characters');
    expect(many.stderr).toContain('--operator-email: must be an e-mail address');
    expect(many.stderr).toContain('--repo-url: must be an http or https URL');
  });

  it('exits 4 on a wrong keystore password', async () => {
    const { cli } = freshCli();
    await cli(['keys', 'new', 'k', '--password-file', passwordFile]);
    const result = await cli(
      ['register', '--key', 'k', '--name', 'Locked', '--operator', OPERATOR],
      {
        AGENTCTL_KEYSTORE_PASSWORD: 'not the password',
      },
    );
    expect(result.code).toBe(4);
    expect(result.stderr).toContain('wrong password for key k');
  }, 60_000);

  it('exits 2 (409) when the wallet is already registered', async () => {
    const { cli } = freshCli();
    const key = generatePrivateKey();
    const args = ['register', '--name', 'Twice', '--operator', OPERATOR];
    expect((await cli(args, { AGENTCTL_PRIVATE_KEY: key })).code).toBe(0);
    // The profile already holds a key: refused locally unless --force.
    const kept = await cli(['--json', ...args], { AGENTCTL_PRIVATE_KEY: key });
    expect(kept.code).toBe(2);
    expect(JSON.parse(kept.stderr).error).toContain('already holds an API key');
    // With --force, the wallet's registration is found before anything is signed or sent.
    const again = await cli(['--json', ...args, '--force'], { AGENTCTL_PRIVATE_KEY: key });
    expect(again.code).toBe(2);
    expect(JSON.parse(again.stderr)).toMatchObject({
      code: 'conflict',
      error: expect.stringContaining('is already registered, as Twice'),
    });
  });

  it('registers into a new profile named with --profile, leaving the default one alone', async () => {
    const { dir, cli } = freshCli();
    const first = generatePrivateKey();
    const args = ['register', '--name', 'First', '--operator', OPERATOR, '--yes'];
    expect((await cli(args, { AGENTCTL_PRIVATE_KEY: first })).code).toBe(0);
    const second = await cli(
      ['--profile', 'second', 'register', '--name', 'Again', '--operator', OPERATOR, '--yes'],
      { AGENTCTL_PRIVATE_KEY: generatePrivateKey() },
    );
    expect(second.stderr).toContain('stored in profile "second"');
    expect(second.code).toBe(0);
    const config = JSON.parse(readFileSync(join(dir, 'config.json'), 'utf8'));
    expect(Object.keys(config.profiles).sort()).toEqual(['default', 'second']);
    expect(config.profiles.second.api_key).not.toBe(config.profiles.default.api_key);
    // Other commands still refuse a profile that does not exist.
    const typo = await cli(['--profile', 'secnd', 'whoami']);
    expect(typo.code).toBe(2);
    expect(typo.stderr).toContain('no profile named "secnd"');
  });
});
