import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runCli } from '../helpers/cli.ts';

/**
 * Usage errors in one voice, with the built binary (issue 22, a reviewer's findings): -q
 * drops every did-you-mean, --json keeps stderr to one JSON object, and commander's own
 * messages are said in ours.
 */

const dir = mkdtempSync(join(tmpdir(), 'agentctl-voice-usage-'));
const cli = (args: string[], env: NodeJS.ProcessEnv = {}) =>
  runCli(args, { AGENTCTL_CONFIG_DIR: dir, ...env });
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('-q: a usage error without its did-you-mean', () => {
  it('for our own checks as for commander', async () => {
    const file = join(dir, 'strategy.json');
    writeFileSync(file, JSON.stringify({ name: 'n', description: 'd', max_position_size: 5 }));
    for (const [args, loud] of [
      [
        ['deposit', 'moderat', '1'],
        'vault moderat: must be one of conservative, moderate, aggressive',
      ],
      [['config', 'set', 'basee_url', 'x'], 'no setting named basee_url'],
      [['strategy', 'submit', '--file', file, '--dry-run'], 'unknown field "max_position_size"'],
    ] as const) {
      const said = await cli([...args]);
      expect(said.code).toBe(2);
      expect(said.stderr).toContain(loud);
      expect(said.stderr).toContain('(did you mean');
      const quiet = await cli(['-q', ...args]);
      expect(quiet.code).toBe(2);
      expect(quiet.stderr).toContain(loud);
      expect(quiet.stderr).not.toContain('did you mean');
      expect(quiet.stderr).toMatch(/^agentctl: [^\n]+\n$/);
    }
  });
});

describe('strategy submit --file', () => {
  it('suggests the field an unknown one begins', async () => {
    const file = join(dir, 'prefix.json');
    writeFileSync(file, JSON.stringify({ name: 'n', description: 'd', max_position_size: 5 }));
    const said = await cli(['strategy', 'submit', '--file', file, '--dry-run']);
    expect(said.code).toBe(2);
    expect(said.stderr).toContain(
      'unknown field "max_position_size" (did you mean max_position_size_percent?)',
    );
  });
});

describe("commander's usage errors, in our voice", () => {
  it.each([
    [
      ['data', 'vaults', '--risk', 'moderat'],
      'agentctl: --risk moderat: must be one of conservative, moderate, aggressive (did you mean moderate?)',
    ],
    [['vaults', '--wide', 'extra'], 'agentctl: vaults takes no arguments (got "extra")'],
    [
      ['deposit', 'moderate', '1', '2'],
      'agentctl: deposit takes 2 arguments: agentctl deposit <vault> <amount> (got "moderate" "1" "2")',
    ],
    [
      ['data', 'transactions', '--all', '--limit', '5'],
      'agentctl: --all and --limit cannot be used together (--all: every page)',
    ],
    [['--profile'], 'agentctl: --profile needs a value: --profile <name>'],
    [['lookup'], 'agentctl: lookup needs <wallet>: agentctl lookup <wallet>'],
    [['serve', '--port', 'abc'], 'agentctl: --port abc: must be an integer from 0 to 65535'],
    [
      ['completion', 'fsh'],
      'agentctl: shell fsh: must be one of bash, zsh, fish (did you mean zsh?)',
    ],
  ])('%j', async (args, said) => {
    const result = await cli(args);
    expect(result.code).toBe(2);
    expect(result.stderr.split('\n')[0]).toContain(said);
    expect(result.stderr).not.toMatch(
      /option '|Allowed choices|too many arguments|argument missing/,
    );
  });

  it('with -q, without the did-you-mean; with --json, the did-you-mean as the hint', async () => {
    const quiet = await cli(['-q', 'data', 'vaults', '--risk', 'moderat']);
    expect(quiet.stderr).toBe(
      'agentctl: --risk moderat: must be one of conservative, moderate, aggressive\n',
    );
    const json = await cli(['--json', 'data', 'vaults', '--risk', 'moderat']);
    expect(json.code).toBe(2);
    expect(JSON.parse(json.stderr)).toEqual({
      error: '--risk moderat: must be one of conservative, moderate, aggressive',
      hint: 'did you mean moderate?',
      status: null,
      code: 'usage',
    });
  });
});

describe('--json: a missing command is one JSON object, not the help', () => {
  it.each([
    [['--json'], 'agentctl needs a command'],
    [['--json', 'data'], 'agentctl data needs a command'],
  ])('%j', async (args, error) => {
    const result = await cli(args);
    expect(result.code).toBe(2);
    expect(result.stdout).toBe('');
    expect(result.stderr.trimEnd().split('\n')).toHaveLength(1);
    expect(JSON.parse(result.stderr)).toMatchObject({ error, status: null, code: 'usage' });
  });

  it('without --json, the help as before (on stderr)', async () => {
    const result = await cli(['data']);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('Usage: agentctl data');
  });
});
