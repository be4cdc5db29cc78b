import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { runCli } from '../helpers/cli.ts';
import { BIN } from '../helpers/serve.ts';

const COMMITTED = {
  bash: new URL('../../completions/agentctl.bash', import.meta.url),
  zsh: new URL('../../completions/_agentctl', import.meta.url),
  fish: new URL('../../completions/agentctl.fish', import.meta.url),
};

describe('agentctl completion', () => {
  it.each(Object.entries(COMMITTED))(
    'prints the committed %s script (run `npm run build:completions` after changing commands)',
    async (shell, file) => {
      const result = await runCli(['completion', shell]);
      expect(result.code).toBe(0);
      expect(result.stdout).toBe(readFileSync(file, 'utf8'));
    },
  );

  it('refuses an unknown shell with exit 2', async () => {
    const result = await runCli(['completion', 'tcsh']);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('bash, zsh, fish');
  });

  /** What bash would offer after the words typed so far (the last one being completed). */
  function bashComplete(words: string[]): string[] {
    const script = `
      source ${JSON.stringify(COMMITTED.bash.pathname)}
      COMP_WORDS=(agentctl ${words.map((w) => JSON.stringify(w)).join(' ')})
      COMP_CWORD=${words.length}
      _agentctl
      printf '%s\\n' "\${COMPREPLY[@]}"`;
    const result = spawnSync('bash', ['-c', script], { encoding: 'utf8' });
    expect(result.status).toBe(0);
    return result.stdout.split('\n').filter(Boolean);
  }

  it('completes commands, subcommands and options in bash', () => {
    expect(bashComplete(['va'])).toEqual(['vaults']);
    expect(bashComplete(['keys', ''])).toEqual(['new', 'import', 'list', 'address', 'remove']);
    expect(bashComplete(['--json', 'strategy', 'su'])).toEqual(['submit']);
    expect(bashComplete(['deposit', 'moderate', '--y'])).toEqual(['--yes']);
    expect(bashComplete(['strategy', 'submit', '--max-l'])).toEqual(['--max-leverage']);
  });

  it('is reachable from the binary', () => {
    const result = spawnSync(process.execPath, [BIN, 'completion', '--help'], { encoding: 'utf8' });
    expect(result.stdout).toContain('completion');
  });
});
