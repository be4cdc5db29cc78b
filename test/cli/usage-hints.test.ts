import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runCli } from '../helpers/cli.ts';

const dir = mkdtempSync(join(tmpdir(), 'agentctl-usage-'));
const cli = (args: string[]) => runCli(args, { AGENTCTL_CONFIG_DIR: dir });
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('an option given before the command it belongs to', () => {
  it('says which command has it and where it goes, without echoing its value', async () => {
    const misplaced = await cli(['--admin-token', 's3cret-admin', 'sandbox', 'info']);
    expect(misplaced.code).toBe(2);
    expect(misplaced.stderr).toBe(
      "agentctl: unknown option '--admin-token'\n" +
        '--admin-token is an option of `agentctl sandbox`: agentctl sandbox --admin-token <token> info\n' +
        '(run `agentctl --help` for usage)\n',
    );
    const json = await cli(['--json', '--admin-token=s3cret-admin', 'sandbox', 'info']);
    expect(json.code).toBe(2);
    expect(JSON.parse(json.stderr)).toEqual({
      error: "unknown option '--admin-token'",
      hint: '--admin-token is an option of `agentctl sandbox`: agentctl --json sandbox --admin-token <token> info',
      status: null,
      code: 'usage',
    });
    expect(json.stderr).not.toContain('s3cret-admin');
  });

  it('names the commands that have it when the command line names none of them', async () => {
    const elsewhere = await cli(['--usdc', '5', 'vaults']);
    expect(elsewhere.code).toBe(2);
    expect(elsewhere.stderr).toContain(
      "--usdc is an option of `agentctl sandbox fund`: give it after the command's name",
    );
  });
});

describe('--quiet usage errors', () => {
  it('are the one error line: no did-you-mean, no --help pointer', async () => {
    for (const args of [
      ['-q', 'depost'],
      ['--quiet', 'strategy', 'submit', '--bogus'],
      ['-qv', '--admin-token', 'x', 'sandbox', 'info'],
    ]) {
      const quiet = await cli(args);
      expect(quiet.code).toBe(2);
      expect(quiet.stderr).toMatch(/^agentctl: [^\n]+\n$/);
    }
  });
});
