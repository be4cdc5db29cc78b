import { execFile, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { runCli } from '../helpers/cli.ts';
import { cannedServer } from '../helpers/run-context.ts';
import { BIN } from '../helpers/serve.ts';

const execFileAsync = promisify(execFile);

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

  it('completes option values and fixed argument values, not subcommands or file names', () => {
    // An option's value: its choices, or nothing for free text.
    expect(bashComplete(['serve', '--log-level', 'tr'])).toEqual(['trace']);
    expect(bashComplete(['register', '--type', 'tr'])).toEqual(['trading']);
    // The same flag takes other values under another command.
    expect(bashComplete(['data', 'transactions', '--type', 'dep'])).toEqual([
      'deposit',
      'deposit_request',
    ]);
    expect(bashComplete(['data', 'history', 'moderate', '--period', ''])).toEqual([
      '7d',
      '30d',
      '90d',
      '1y',
      'all',
    ]);
    expect(bashComplete(['register', '--name', ''])).toEqual([]);
    // Fixed sets of values for arguments.
    expect(bashComplete(['deposit', 'mod'])).toEqual(['moderate']);
    expect(bashComplete(['deposit', 'moderate', ''])).toEqual([]);
    expect(bashComplete(['vote', '7', 'ag'])).toEqual(['against']);
    expect(bashComplete(['config', 'get', 'api'])).toEqual(['api_key']);
    expect(bashComplete(['completion', 'z'])).toEqual(['zsh']);
    expect(bashComplete(['sandbox', 'tier', '0xabc', 'est'])).toEqual(['established']);
    // A global option's value is skipped when finding the command.
    expect(bashComplete(['--profile', 'x', 'deposit', 'agg'])).toEqual(['aggressive']);
  });

  it('completes profile and key names from the configuration', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'agentctl-complete-'));
    try {
      const env = { AGENTCTL_CONFIG_DIR: dir };
      await runCli(['--profile', 'live', 'config', 'set', 'base_url', 'https://example.org'], env);
      await runCli(['--profile', 'lab', 'config', 'set', 'base_url', 'https://example.org'], env);
      await runCli(['keys', 'new', 'trader'], {
        ...env,
        AGENTCTL_KEYSTORE_PASSWORD: 'correct horse',
      });
      // The script calls `agentctl`: put the built binary on PATH under that name.
      const bin = join(dir, 'bin');
      mkdirSync(bin);
      writeFileSync(
        join(bin, 'agentctl'),
        `#!/bin/sh\nexec ${JSON.stringify(process.execPath)} ${JSON.stringify(BIN)} "$@"\n`,
        { mode: 0o755 },
      );
      const complete = (words: string[]) => {
        const script = `
          source ${JSON.stringify(COMMITTED.bash.pathname)}
          COMP_WORDS=(agentctl ${words.map((w) => JSON.stringify(w)).join(' ')})
          COMP_CWORD=${words.length}
          _agentctl
          printf '%s\\n' "\${COMPREPLY[@]}"`;
        const result = spawnSync('bash', ['-c', script], {
          encoding: 'utf8',
          env: { ...process.env, ...env, PATH: `${bin}:${process.env.PATH}` },
        });
        return result.stdout.split('\n').filter(Boolean);
      };
      expect(complete(['--profile', 'l'])).toEqual(['lab', 'live']);
      expect(complete(['--profile', ''])).not.toContain('deposit');
      expect(complete(['keys', 'remove', 'tr'])).toEqual(['trader']);
      expect(complete(['register', '--key', ''])).toEqual(['trader']);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('completes snapshot names from the sandbox, and nothing, silently, when it does not answer', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'agentctl-complete-snapshots-'));
    const sandbox = await cannedServer((request) =>
      request.url.pathname === '/sandbox/snapshots' && request.headers['x-admin-token'] === 'tok'
        ? {
            body: {
              snapshots: ['genesis', 'base', 'before-vote'].map((name, i) => ({
                name,
                block_number: i,
                created_at: '2026-11-26T12:00:00.000Z',
                size_bytes: 1000,
              })),
            },
          }
        : { status: 401, body: { error: 'admin token required' } },
    );
    try {
      const bin = join(dir, 'bin');
      mkdirSync(bin);
      writeFileSync(
        join(bin, 'agentctl'),
        `#!/bin/sh\nexec ${JSON.stringify(process.execPath)} ${JSON.stringify(BIN)} "$@"\n`,
        { mode: 0o755 },
      );
      const complete = async (words: string[], env: Record<string, string>) => {
        const script = `
          source ${JSON.stringify(COMMITTED.bash.pathname)}
          COMP_WORDS=(agentctl ${words.map((w) => JSON.stringify(w)).join(' ')})
          COMP_CWORD=${words.length}
          _agentctl
          printf '%s\\n' "\${COMPREPLY[@]}"`;
        // Not spawnSync: the sandbox answering runs in this process.
        const result = await execFileAsync('bash', ['-c', script], {
          encoding: 'utf8',
          cwd: dir,
          env: {
            ...process.env,
            AGENTCTL_CONFIG_DIR: join(dir, 'config'),
            PATH: `${bin}:${process.env.PATH}`,
            ...env,
          },
        });
        // Silent whatever happens: nothing on the terminal but the completion.
        expect(result.stderr).toBe('');
        return result.stdout.split('\n').filter(Boolean);
      };
      const env = { AGENTCTL_BASE_URL: sandbox.url, AGENTCTL_ADMIN_TOKEN: 'tok' };
      expect(await complete(['sandbox', 'restore', ''], env)).toEqual([
        'genesis',
        'base',
        'before-vote',
      ]);
      expect(await complete(['sandbox', 'snapshot-delete', 'b'], env)).toEqual([
        'base',
        'before-vote',
      ]);
      expect(await complete(['sandbox', '--admin-token', 'x', 'export', 'be'], env)).toEqual([
        'before-vote',
      ]);
      // The export's second argument is a file; a new snapshot's name is free text.
      writeFileSync(join(dir, 'base.sandbox'), '');
      expect(await complete(['sandbox', 'export', 'base', 'base.'], env)).toEqual(['base.sandbox']);
      expect(await complete(['sandbox', 'snapshot', ''], env)).toEqual([]);
      // A wrong token, no token, nothing listening: no names, and not a word said.
      expect(
        await complete(['sandbox', 'restore', ''], { ...env, AGENTCTL_ADMIN_TOKEN: 'wrong' }),
      ).toEqual([]);
      expect(
        await complete(['sandbox', 'restore', ''], { ...env, AGENTCTL_ADMIN_TOKEN: '' }),
      ).toEqual([]);
      const requests = sandbox.requests.length;
      await sandbox.close();
      expect(await complete(['sandbox', 'restore', ''], env)).toEqual([]);
      expect(requests).toBe(4);
    } finally {
      await sandbox.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('is reachable from the binary', () => {
    const result = spawnSync(process.execPath, [BIN, 'completion', '--help'], { encoding: 'utf8' });
    expect(result.stdout).toContain('completion');
  });
});
