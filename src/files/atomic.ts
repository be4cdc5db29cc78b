import { randomBytes } from 'node:crypto';
import {
  closeSync,
  fchmodSync,
  fsyncSync,
  openSync,
  renameSync,
  unlinkSync,
  writeFileSync,
} from 'node:fs';
import { basename, dirname, join } from 'node:path';

/**
 * A name for a temporary file beside `path` that no one can guess beforehand
 * (`.NAME.RANDOM.tmp`): open it with 'wx' (O_EXCL), so that nothing put there in advance, a
 * symbolic link included, is ever written through.
 */
export function tempPathBeside(path: string): string {
  return join(dirname(path), `.${basename(path)}.${randomBytes(6).toString('hex')}.tmp`);
}

/**
 * Writes `content` to `path` whole or not at all, readable by its owner only (0600): a new
 * temp file beside it (an unguessable name, created exclusively, 0600 from the start),
 * fsynced, renamed into place, then the directory fsynced; on failure the temp file is
 * removed. A file that was there is replaced, its permissions with it. Shared by the
 * sandbox's state dir and the CLI's secret outputs (a seed's map of API keys).
 */
export function writeFileAtomically(path: string, content: string): void {
  const temp = tempPathBeside(path);
  const fd = openSync(temp, 'wx', 0o600);
  try {
    try {
      fchmodSync(fd, 0o600); // whatever the umask left of it
      writeFileSync(fd, content);
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    renameSync(temp, path);
  } catch (error) {
    try {
      unlinkSync(temp);
    } catch {}
    throw error;
  }
  fsyncPath(dirname(path));
}

/** fsync of a file or a directory (for a directory: the names in it, after a rename). */
export function fsyncPath(path: string): void {
  const fd = openSync(path, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}
