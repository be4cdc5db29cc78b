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
