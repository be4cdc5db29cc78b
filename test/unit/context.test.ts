import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Command } from 'commander';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createContext } from '../../src/cli/context.ts';
import { buildProgram } from '../../src/cli/main.ts';
import { openConfig } from '../../src/config/profiles.ts';

let dir: string;
beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'agentctl-context-'));
  await openConfig({ AGENTCTL_CONFIG_DIR: dir }).set('work', {
    base_url: 'http://profile.example',
    api_key: 'agk_profile',
  });
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Parses argv with the real command tree and returns the context the action would get. */
async function contextFor(args: string[], env: NodeJS.ProcessEnv) {
  const program = buildProgram();
  let captured: Command | undefined;
  program.hook('preAction', (_root, action) => {
    captured = action;
    throw new Error('stop before the action');
  });
  await program.parseAsync(['node', 'agentctl', ...args]).catch(() => undefined);
  if (!captured) throw new Error(`no action for ${args.join(' ')}`);
  return createContext(captured, { AGENTCTL_CONFIG_DIR: dir, ...env });
}

describe('option precedence: flag, then environment, then profile, then default', () => {
  it('takes the flag over everything', async () => {
    const context = await contextFor(
      ['--profile', 'work', '--base-url', 'http://flag.example', '--api-key', 'agk_flag', 'health'],
      { AGENTCTL_BASE_URL: 'http://env.example', AGENTCTL_API_KEY: 'agk_env' },
    );
    expect(await context.baseUrl()).toBe('http://flag.example');
    expect(await context.apiKey()).toBe('agk_flag');
  });

  it('takes the environment over the profile', async () => {
    const context = await contextFor(['--profile', 'work', 'health'], {
      AGENTCTL_BASE_URL: 'http://env.example',
      AGENTCTL_API_KEY: 'agk_env',
    });
    expect(await context.baseUrl()).toBe('http://env.example');
    expect(await context.apiKey()).toBe('agk_env');
  });

  it('takes the profile, chosen by flag or by AGENTCTL_PROFILE, over the default', async () => {
    const byEnv = await contextFor(['vaults'], { AGENTCTL_PROFILE: 'work' });
    expect(byEnv.profileName).toBe('work');
    expect(await byEnv.baseUrl()).toBe('http://profile.example');
    expect(await byEnv.apiKey()).toBe('agk_profile');
    const byFlag = await contextFor(['--profile', 'work', 'vaults'], { AGENTCTL_PROFILE: 'other' });
    expect(byFlag.profileName).toBe('work');
  });

  it('falls back to the local sandbox and no key', async () => {
    const context = await contextFor(['stats'], {});
    expect(context.profileName).toBe('default');
    expect(await context.baseUrl()).toBe('http://127.0.0.1:8787');
    expect(await context.apiKey()).toBeUndefined();
  });

  it('reads global flags given after the command too', async () => {
    const context = await contextFor(
      ['deposit', 'moderate', '1', '--json', '--base-url', 'http://late.example'],
      {},
    );
    expect(context.globals.json).toBe(true);
    expect(await context.baseUrl()).toBe('http://late.example');
  });
});
