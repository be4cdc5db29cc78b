import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runCli } from '../helpers/cli.ts';

const dir = mkdtempSync(join(tmpdir(), 'agentctl-voice-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const cli = (args: string[], env: NodeJS.ProcessEnv = {}) =>
  runCli(args, { AGENTCTL_CONFIG_DIR: dir, ...env });

describe('account commands speak in one voice', () => {
  it('config set with a misspelt setting: one line, the settings, a did-you-mean', async () => {
    const result = await cli(['config', 'set', 'basee_url', 'http://127.0.0.1:8787']);
    expect(result.code).toBe(2);
    expect(result.stderr).toBe(
      'agentctl: no setting named basee_url: the settings are base_url, data_url, wallet_address, keystore, api_key (did you mean base_url?)\n',
    );
    const json = await cli(['--json', 'config', 'get', 'walet_address']);
    expect(json.code).toBe(2);
    expect(JSON.parse(json.stderr)).toMatchObject({
      code: 'usage',
      error: expect.stringContaining('(did you mean wallet_address?)'),
    });
  });

  it('register --type with an unknown type names the types', async () => {
    const result = await cli(['register', '--name', 'Typed', '--type', 'foo']);
    expect(result.code).toBe(2);
    expect(result.stderr).toBe(
      'agentctl: --type foo: must be one of trading, governance, analytics, custom, quant, cfo, research\n',
    );
  });

  it('a missing key or password file is named, never a bare ENOENT', async () => {
    const keyFile = join(dir, 'missing-key.txt');
    const imported = await cli(['keys', 'import', 'old', '--private-key-file', keyFile]);
    expect(imported.code).toBe(2);
    expect(imported.stderr).toBe(
      `agentctl: --private-key-file ${keyFile}: no such file; give the path of a file that holds the private key (64 hex digits, 0x optional)\n`,
    );
    const made = await cli(['keys', 'new', '--password-file', join(dir, 'missing-pw')]);
    expect(made.code).toBe(2);
    expect(made.stderr).toContain('missing-pw: no such file; give the path of a file that holds');
    expect(made.stderr + imported.stderr).not.toContain('ENOENT');
  });
});
