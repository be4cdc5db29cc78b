import { readFileSync } from 'node:fs';
import { KeystoreError } from './store.ts';

/**
 * The text of a file an option names (`--password-file`, `--private-key-file`), or an error
 * that says which file, what is wrong with it, and what to do, instead of a bare ENOENT.
 */
export function readOptionFile(option: string, path: string, holds: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    const why =
      code === 'ENOENT'
        ? 'no such file'
        : code === 'EACCES' || code === 'EPERM'
          ? 'cannot be read (check its permissions)'
          : code === 'EISDIR'
            ? 'is a directory, not a file'
            : `cannot be read (${code ?? (error as Error).message})`;
    throw new KeystoreError(
      `${option} ${path}: ${why}; give the path of a file that holds ${holds}`,
    );
  }
}
