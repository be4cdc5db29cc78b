import {
  chmodSync,
  closeSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
  writeSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { StartupError } from './errors.ts';
import { isRunning } from './process.ts';

/**
 * Bumped whenever the on-disk layout changes in a way migrations cannot carry forward.
 * A state dir written with another format is refused rather than misread.
 */
export const STATE_FORMAT = 2;
const FORMAT_FILE = 'agentctl-state.json';
const PID_FILE = 'serve.pid';
const TEMP_PREFIX = 'agentctl-sandbox-';

/**
 * Removes temporary state dirs left by a serve that was killed with kill -9, after
 * `stopAbandoned` has stopped their anvil. It returns false for a dir whose serve still runs.
 * Dirs without an anvil pidfile are left alone: they may be starting right now.
 */
export function reapAbandonedTempDirs(stopAbandoned: (dir: string) => boolean): void {
  for (const name of readdirSync(tmpdir())) {
    if (!name.startsWith(TEMP_PREFIX)) continue;
    const path = join(tmpdir(), name);
    try {
      if (existsSync(join(path, 'anvil.pid')) && stopAbandoned(path)) {
        rmSync(path, { recursive: true, force: true });
      }
    } catch {
      // Not ours to clean (another user's, or already gone).
    }
  }
}

export class StateDirError extends StartupError {}

export interface StateDir {
  path: string;
  persistent: boolean;
  databasePath: string;
  /** Gives the directory up: drops the pid lock; a temporary directory is deleted. */
  release(): void;
}

/**
 * Opens `--state DIR` (creating it, or checking its format version), or makes a
 * temporary directory when no DIR is given. Takes a pid lock so two `serve`
 * processes never share one state; a lock left by a killed process is taken over.
 */
export function openStateDir(dir: string | undefined): StateDir {
  const persistent = dir !== undefined;
  const path = persistent ? resolve(dir) : mkdtempSync(join(tmpdir(), TEMP_PREFIX));
  // A fresh temporary directory cannot be shared, so only a persistent one needs the lock.
  if (persistent) {
    prepareFormat(path);
    lock(path);
  }
  return {
    path,
    persistent,
    databasePath: join(path, 'sandbox.db'),
    release() {
      if (persistent) rmSync(join(path, PID_FILE), { force: true });
      else rmSync(path, { recursive: true, force: true });
    },
  };
}

function prepareFormat(path: string): void {
  mkdirSync(path, { recursive: true, mode: 0o700 });
  chmodSync(path, 0o700);
  const formatPath = join(path, FORMAT_FILE);
  if (existsSync(formatPath)) {
    let format: unknown;
    try {
      format = JSON.parse(readFileSync(formatPath, 'utf8')).format;
    } catch {
      throw new StateDirError(
        `${formatPath} is unreadable; is ${path} an agentctl state directory?`,
      );
    }
    if (format !== STATE_FORMAT) {
      throw new StateDirError(
        `state directory ${path} has format version ${String(format)}, but this agentctl uses format ${STATE_FORMAT}; ` +
          'use a matching agentctl or start with a new --state directory',
      );
    }
    return;
  }
  if (readdirSync(path).length > 0) {
    throw new StateDirError(
      `${path} is not empty and is not an agentctl state directory; give --state an empty or new directory`,
    );
  }
  writeAtomically(formatPath, `${JSON.stringify({ format: STATE_FORMAT })}\n`);
}

/** Creates serve.pid exclusively; a file left by a process that is gone is replaced. */
function lock(path: string): void {
  const pidPath = join(path, PID_FILE);
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      const fd = openSync(pidPath, 'wx', 0o600);
      writeSync(fd, `${process.pid}\n`);
      closeSync(fd);
      return;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    }
    const pid = Number(readFileSync(pidPath, 'utf8').trim());
    if (Number.isInteger(pid) && pid > 0 && isRunning(pid)) {
      throw new StateDirError(`another agentctl serve (pid ${pid}) is using ${path}`);
    }
    rmSync(pidPath, { force: true });
  }
  throw new StateDirError(`could not lock ${path}: another agentctl serve is starting there`);
}

function writeAtomically(path: string, content: string): void {
  const temp = `${path}.${process.pid}.tmp`;
  writeFileSync(temp, content, { mode: 0o600 });
  renameSync(temp, path);
}
