import { closeSync, fsyncSync, openSync, renameSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';

/**
 * Writes `content` to `path` whole or not at all, readable by its owner only (0600): a temp
 * file beside it, fsynced, renamed into place, then the directory fsynced. A file that was
 * there is replaced, its permissions with it. Shared by the sandbox's state dir and the
 * CLI's secret outputs (a seed's map of API keys).
 */
export function writeFileAtomically(path: string, content: string): void {
  const temp = `${path}.${process.pid}.tmp`;
  const fd = openSync(temp, 'w', 0o600);
  try {
    writeFileSync(fd, content);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  renameSync(temp, path);
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
