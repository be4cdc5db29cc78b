import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { openStateDir, STATE_FORMAT } from '../../src/sandbox/state-dir.ts';

/**
 * The temporary sandbox of `serve --from FILE --detach` in the default state dir: what it
 * leaves there, what a killed one left, and that a kept sandbox there is never touched.
 */
let dir: string;
let stopped: string[];
const stopAnvils = (path: string) => {
  stopped.push(path);
};
beforeEach(() => {
  dir = join(mkdtempSync(join(tmpdir(), 'agentctl-state-dir-temporary-')), 'sandbox');
  stopped = [];
});
afterEach(() => rmSync(join(dir, '..'), { recursive: true, force: true }));

/** What a temporary sandbox killed with kill -9 leaves: its mark, its state, its pid files. */
function killedTemporaryLeftovers(): void {
  mkdirSync(join(dir, 'snapshots', 'base'), { recursive: true });
  writeFileSync(join(dir, 'temporary-sandbox'), '');
  writeFileSync(join(dir, 'agentctl-state.json'), `{"format":${STATE_FORMAT},"sandbox_id":"old"}`);
  writeFileSync(join(dir, 'sandbox.db'), 'old');
  writeFileSync(join(dir, 'anvil.pid'), '123 456 8545');
  writeFileSync(join(dir, 'serve.log'), 'the old log\n');
}

describe('openStateDir with a temporary sandbox in a given dir', () => {
  it('is new, marked while it runs, and leaves only its lock and log when released', () => {
    mkdirSync(dir);
    writeFileSync(join(dir, 'serve.log'), 'ready block\n');
    const state = openStateDir(dir, { temporary: true, stopAnvils });
    expect(state).toMatchObject({ path: dir, persistent: false, sandboxId: undefined });
    expect(existsSync(join(dir, 'temporary-sandbox'))).toBe(true);
    state.markCreated('new');
    writeFileSync(join(dir, 'sandbox.db'), 'new');
    state.announce({ url: 'http://127.0.0.1:1', rpc_url: 'http://127.0.0.1:2' });
    expect(readdirSync(dir)).toContain('serve.json');
    state.release();
    expect(readdirSync(dir).sort()).toEqual(['serve.lock', 'serve.log']);
    expect(stopped).toEqual([]);
  });

  it('removes what a killed one left, after stopping its anvils, and keeps the log', () => {
    killedTemporaryLeftovers();
    const state = openStateDir(dir, { temporary: true, stopAnvils });
    expect(stopped).toEqual([dir]);
    expect(state.sandboxId).toBeUndefined();
    expect(readdirSync(dir).sort()).toEqual([
      'serve.lock',
      'serve.log',
      'serve.pid',
      'temporary-sandbox',
    ]);
    state.release();
  });

  it('refuses a dir that keeps a sandbox, and leaves it as it was', () => {
    mkdirSync(dir);
    writeFileSync(
      join(dir, 'agentctl-state.json'),
      `{"format":${STATE_FORMAT},"sandbox_id":"kept"}`,
    );
    writeFileSync(join(dir, 'sandbox.db'), 'kept');
    expect(() => openStateDir(dir, { temporary: true, stopAnvils })).toThrow(
      `--from: ${dir} holds a sandbox`,
    );
    expect(readdirSync(dir).sort()).toEqual(['agentctl-state.json', 'sandbox.db', 'serve.lock']);
    expect(stopped).toEqual([]);
  });

  it('is not taken for a kept sandbox by a persistent start, which starts anew', () => {
    killedTemporaryLeftovers();
    const state = openStateDir(dir, { stopAnvils });
    expect(state).toMatchObject({ persistent: true, sandboxId: undefined });
    expect(stopped).toEqual([dir]);
    expect(readdirSync(dir).sort()).toEqual(['serve.lock', 'serve.log', 'serve.pid']);
    state.release();
  });
});
