import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  commitSnapshot,
  listSnapshots,
  newSnapshotDir,
  readSnapshotMeta,
  recoverSnapshotDirs,
  removeSnapshot,
  type SnapshotMeta,
  snapshotDir,
} from '../../src/sandbox/snapshots/files.ts';

/** Snapshot directories on disk: written whole, replaced safely, and tidied after a crash. */
let state = '';
beforeEach(() => {
  state = mkdtempSync(join(tmpdir(), 'agentctl-snapfiles-'));
});
afterEach(() => {
  rmSync(state, { recursive: true, force: true });
});

const meta = (name: string, block: number): SnapshotMeta => ({
  format: 1,
  name,
  sandbox_id: 'sandbox',
  block_number: block,
  block_hash: `0x${'ab'.repeat(32)}`,
  created_at: 1_800_000_000 + block,
});

async function write(name: string, block: number, content: string) {
  const dir = newSnapshotDir(state, name);
  writeFileSync(join(dir, 'sandbox.db'), content);
  await commitSnapshot(state, dir, meta(name, block));
}

describe('snapshot files', () => {
  it('lists what was committed, with sizes, oldest first, and replaces one whole', async () => {
    await write('b', 20, 'second');
    await write('a', 10, 'first');
    expect(listSnapshots(state).map((entry) => [entry.name, entry.block_number])).toEqual([
      ['a', 10],
      ['b', 20],
    ]);
    expect(listSnapshots(state)[0]?.size_bytes).toBeGreaterThan('first'.length);
    await write('a', 30, 'replaced');
    expect(readSnapshotMeta(state, 'a')?.block_number).toBe(30);
    expect(readFileSync(join(snapshotDir(state, 'a'), 'sandbox.db'), 'utf8')).toBe('replaced');
    expect(readdir(join(state, 'snapshot-work'))).toEqual([]);
    expect(removeSnapshot(state, 'a')).toBe(true);
    expect(removeSnapshot(state, 'a')).toBe(false);
    expect(listSnapshots(state).map((entry) => entry.name)).toEqual(['b']);
  });

  it('after a crash: drops a half-written one, and puts back one whose replacement never got in place', async () => {
    await write('kept', 10, 'old');
    // A replacement cut short between moving the old one aside and renaming the new one in.
    const half = newSnapshotDir(state, 'kept');
    writeFileSync(join(half, 'sandbox.db'), 'new, never committed');
    renameSync(snapshotDir(state, 'kept'), join(state, 'snapshot-work', 'old-kept-0123abcd'));
    // And a new one cut short before it was named.
    const other = newSnapshotDir(state, 'other');
    writeFileSync(join(other, 'sandbox.db'), 'partial');
    expect(readSnapshotMeta(state, 'kept')).toBeUndefined();

    recoverSnapshotDirs(state);
    expect(readFileSync(join(snapshotDir(state, 'kept'), 'sandbox.db'), 'utf8')).toBe('old');
    expect(listSnapshots(state).map((entry) => entry.name)).toEqual(['kept']);
    expect(readdir(join(state, 'snapshot-work'))).toEqual([]);
  });

  it('ignores directories that are not snapshots', () => {
    mkdirSync(join(state, 'snapshots', 'genesis'), { recursive: true });
    mkdirSync(join(state, 'snapshots', 'no-meta'));
    expect(listSnapshots(state)).toEqual([]);
    expect(existsSync(join(state, 'snapshots'))).toBe(true);
  });
});

function readdir(path: string): string[] {
  return existsSync(path) ? readdirSync(path) : [];
}
