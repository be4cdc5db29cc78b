import { once } from 'node:events';
import { createWriteStream, type Stats, type WriteStream } from 'node:fs';
import { open as fsOpen, link, rename, stat, unlink } from 'node:fs/promises';
import { dirname, resolve } from 'node:path';
import type { Writable } from 'node:stream';
import { tempPathBeside } from '../files/atomic.ts';
import { CliError, EXIT } from './exit-codes.ts';

/**
 * A file that holds a secret (an exported sandbox holds the wallet's mnemonic), written so
 * that no one else can read it and no one ever sees half of it: a temporary file of mode
 * 0600 beside it, filled, flushed to disk, then put in place in one step. An existing file is
 * never replaced unless `force`; the check is made before any work and again, atomically,
 * when the file is put in place.
 */

export interface SecretFileOptions {
  /** Replace an existing file. */
  force: boolean;
  /** What the file is, for messages: "--force to overwrite it". */
  flag: string;
}

/** What was written: the absolute path and its size. */
export interface WrittenFile {
  path: string;
  bytes: number;
}

/**
 * Refuses at once (exit 2) a path that is a directory, or an existing file without `force`:
 * call it before any request, so a refusal costs nothing.
 */
export async function checkSecretFileTarget(
  file: string,
  options: SecretFileOptions,
): Promise<string> {
  const path = resolve(file);
  let existing: Stats | undefined;
  try {
    existing = await stat(path);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw fileError(file, error);
  }
  if (existing?.isDirectory()) {
    throw new CliError(`${file} is a directory: give a file name`, EXIT.usage);
  }
  if (existing && !options.force) {
    throw new CliError(
      `${file} exists: not overwriting it; pass ${options.flag} to replace it`,
      EXIT.usage,
    );
  }
  return path;
}

/**
 * Writes `file` through `fill`, which gets a function opening a stream on a new temporary
 * file (each call starts over, on a file of its own: a download that is retried never mixes
 * with the bytes of a try that failed) and resolves once the content is complete. On any
 * failure, Ctrl-C included, the temporary files are removed and `file` is as it was.
 */
export async function writeSecretFile(
  file: string,
  options: SecretFileOptions,
  fill: (open: () => Writable) => Promise<void>,
): Promise<WrittenFile> {
  const path = await checkSecretFileTarget(file, options);
  const temps: string[] = [];
  let current: WriteStream | undefined;
  /** Settled once the last file is open (or failed to open). */
  let opened: Promise<unknown> = Promise.resolve();
  const open = () => {
    current?.destroy();
    const temp = tempPathBeside(path);
    temps.push(temp);
    // wx: O_EXCL, never through a link someone put there; 0600 from the first byte.
    current = createWriteStream(temp, { flags: 'wx', mode: 0o600 });
    opened = Promise.race([once(current, 'ready'), once(current, 'close')]).catch(() => {});
    return current;
  };
  let placed: string | undefined;
  let interrupted = () => {};
  try {
    const cancelled = new Promise<never>((_, reject) => {
      interrupted = () => reject(new CliError('cancelled', EXIT.cancelled));
      process.once('SIGINT', interrupted);
    });
    await Promise.race([fill(open), cancelled]);
    const finished = current;
    const temp = temps.at(-1);
    if (!finished || temp === undefined) throw new Error('nothing was written');
    if (!finished.closed) await once(finished, 'close');
    const bytes = finished.bytesWritten;
    const handle = await fsOpen(temp, 'r+');
    try {
      await handle.chmod(0o600); // whatever the umask left of it
      await handle.sync();
    } finally {
      await handle.close();
    }
    await putInPlace(temp, path, file, options);
    placed = temp;
    await syncDirectory(dirname(path));
    return { path, bytes };
  } catch (error) {
    throw error instanceof CliError || !(error as NodeJS.ErrnoException).syscall
      ? error
      : fileError(file, error);
  } finally {
    process.removeListener('SIGINT', interrupted);
    // A download given up on (Ctrl-C) is left to end with its connection, when the command
    // closes its client: destroying its file here would look like a cut to be tried again.
    // A file still being opened would be made after it was removed: wait for it first.
    await opened;
    for (const temp of temps) if (temp !== placed) await unlink(temp).catch(() => {});
  }
}

/** Makes the new name durable (a crash right after would otherwise lose it); best effort. */
async function syncDirectory(dir: string): Promise<void> {
  try {
    const handle = await fsOpen(dir, 'r');
    try {
      await handle.sync();
    } finally {
      await handle.close();
    }
  } catch {
    // Some file systems cannot sync a directory; the file itself is on disk.
  }
}

/** Moves the finished temporary file to `path`: a hard link when not forcing (fails if it exists). */
async function putInPlace(
  temp: string,
  path: string,
  file: string,
  options: SecretFileOptions,
): Promise<void> {
  try {
    if (options.force) return await rename(temp, path);
    try {
      await link(temp, path);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === 'EEXIST') {
        throw new CliError(
          `${file} appeared while it was being written: not overwriting it; pass ${options.flag} to replace it`,
          EXIT.usage,
        );
      }
      // A file system without hard links: the check made before the work stands.
      if (code === 'EPERM' || code === 'ENOTSUP' || code === 'EOPNOTSUPP') {
        return await rename(temp, path);
      }
      throw error;
    }
    await unlink(temp);
  } catch (error) {
    if (error instanceof CliError) throw error;
    throw fileError(file, error);
  }
}

function fileError(file: string, error: unknown): CliError {
  const { code, message } = error as NodeJS.ErrnoException;
  const reason =
    code === 'EACCES' || code === 'EPERM'
      ? 'permission denied'
      : code === 'ENOENT'
        ? 'its directory does not exist'
        : code === 'ENOSPC'
          ? 'no space left on the device'
          : message;
  return new CliError(`cannot write ${file}: ${reason}`, EXIT.failure);
}
