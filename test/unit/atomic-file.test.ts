import {
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { writeFileAtomically } from '../../src/files/atomic.ts';

/**
 * writeFileAtomically writes through a temp file no one can prepare in advance: a symbolic
 * link planted where an older version put its temp file (`PATH.PID.tmp`) is not written
 * through, the file is 0600 whatever was there, and a failed write leaves no temp file.
 */
let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'agentctl-atomic-'));
});
afterEach(() => {
  rmSync(dir, { recursive: true, force: true });
});

describe('writeFileAtomically', () => {
  it('does not follow a symbolic link at a guessable temp name', () => {
    const victim = join(dir, 'victim');
    writeFileSync(victim, 'untouched\n', { mode: 0o644 });
    const path = join(dir, 'seeded.json');
    symlinkSync(victim, `${path}.${process.pid}.tmp`);
    writeFileAtomically(path, '{"secret":1}\n');
    expect(readFileSync(victim, 'utf8')).toBe('untouched\n');
    expect(lstatSync(path).isFile()).toBe(true);
    expect(readFileSync(path, 'utf8')).toBe('{"secret":1}\n');
    expect(statSync(path).mode & 0o777).toBe(0o600);
  });

  it('replaces a file of a looser mode with one of mode 0600', () => {
    const path = join(dir, 'out.json');
    writeFileSync(path, 'old\n', { mode: 0o644 });
    writeFileAtomically(path, 'new\n');
    expect(readFileSync(path, 'utf8')).toBe('new\n');
    expect(statSync(path).mode & 0o777).toBe(0o600);
    expect(readdirSync(dir)).toEqual(['out.json']);
  });

  it('removes its temp file when the write fails', () => {
    // A non-empty directory in the way: the rename into place fails.
    const path = join(dir, 'taken');
    mkdirSync(path);
    writeFileSync(join(path, 'inside'), 'x');
    expect(() => writeFileAtomically(path, 'content\n')).toThrow();
    expect(readdirSync(dir)).toEqual(['taken']);
  });
});
