import {
  chmodSync,
  closeSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join, resolve } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { writeFileAtomically } from '../files/atomic.ts';
import { fileErrorMessage, isFileError, StartupError } from './errors.ts';
import { SERVE_LOG_FILE as LOG_FILE } from './options.ts';

/**
 * Bumped whenever the on-disk layout changes in a way migrations cannot carry forward.
 * A state dir written with another format is refused rather than misread.
 * 3: the chain as a checkpoint in chain/ plus the chain log in sandbox.db.
 * 4: the same, on contracts whose events give the data API its history (every accrual is
 *    logged) and with the ERC-7540 `configurable` vault: a format 3 chain has neither.
 */
export const STATE_FORMAT = 4;
const FORMAT_FILE = 'agentctl-state.json';
const LOCK_FILE = 'serve.lock';
const PID_FILE = 'serve.pid';
/** Where a running serve says where it listens (for `serve status`); removed at exit. */
const ANNOUNCE_FILE = 'serve.json';
const TEMP_PREFIX = 'agentctl-sandbox-';
/**
 * Marks a state dir that holds a temporary sandbox (see SandboxOptions.temporaryState):
 * written before anything else, removed last, so that what a killed one left is known as such.
 */
const TEMPORARY_MARK = 'temporary-sandbox';
/** What emptying a temporary sandbox's dir keeps: the lock held, the serve's pid, its log. */
const KEPT_WHEN_EMPTIED = new Set([LOCK_FILE, PID_FILE, LOG_FILE, TEMPORARY_MARK]);
/** What a first start can leave behind before it writes the format file (a crash mid-way). */
const FIRST_START_FILES = new Set([
  'sandbox.db',
  'sandbox.db-wal',
  'sandbox.db-shm',
  'wallet.mnemonic',
  'anvil.pid',
  'anvil.pid.tmp',
  'anvil-standby.pid',
  'anvil-standby.pid.tmp',
  'anvil-load-state.json',
  'chain',
  LOCK_FILE,
  PID_FILE,
  ANNOUNCE_FILE,
  LOG_FILE,
]);

/**
 * Removes temporary state dirs left by a serve that was killed with kill -9, after
 * `stopAbandoned` has stopped their anvil. It returns false for a dir whose serve still runs.
 * Dirs without an anvil pidfile are left alone: they may be starting right now.
 */
export function reapAbandonedTempDirs(
  recordsAnvil: (dir: string) => boolean,
  stopAbandoned: (dir: string) => boolean,
): void {
  for (const name of readdirSync(tmpdir())) {
    if (!name.startsWith(TEMP_PREFIX)) continue;
    const path = join(tmpdir(), name);
    try {
      if (recordsAnvil(path) && stopAbandoned(path)) {
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
  /** The sandbox's id from the format file; undefined for a new state. */
  sandboxId: string | undefined;
  /** Writes the format file, naming the sandbox: from now on the dir is a state dir. */
  markCreated(sandboxId: string): void;
  /** Records where this serve listens, for `serve status` (persistent dirs only). */
  announce(where: { url: string; rpc_url: string }): void;
  /** Gives the directory up: drops the lock; a temporary directory is deleted. */
  release(): void;
}

export interface OpenStateDirOptions {
  /** DIR holds a temporary sandbox (SandboxOptions.temporaryState); see openStateDir. */
  temporary?: boolean;
  /** Stops the anvils a killed serve left in a dir (called holding its lock). */
  stopAnvils: (dir: string) => void;
}

/**
 * Opens `--state DIR` (creating it, or checking its format version), or makes a
 * temporary directory when no DIR is given. A persistent dir is locked for as long as this
 * process runs: an exclusive SQLite lock on serve.lock, which the kernel drops when the
 * process dies however it dies, so there is no stale lock to take over and no race doing so.
 *
 * With `temporary`, DIR holds a temporary sandbox that `serve stop` finds there (see
 * SandboxOptions.temporaryState): locked as a persistent dir is, emptied under the lock (of
 * what a killed temporary sandbox left; a dir holding anything else is refused), and emptied
 * again, its log aside, when released. What a killed temporary sandbox left is removed, under
 * the lock, by a persistent start too: it was never meant to be kept.
 */
export function openStateDir(dir: string | undefined, options: OpenStateDirOptions): StateDir {
  if (dir !== undefined && options.temporary) return openTemporaryIn(resolve(dir), options);
  const persistent = dir !== undefined;
  const path = persistent ? resolve(dir) : mkdtempSync(join(tmpdir(), TEMP_PREFIX));
  let unlock = () => {};
  let sandboxId: string | undefined;
  if (persistent) {
    const leftOver = () => existsSync(join(path, TEMPORARY_MARK));
    try {
      createDirectory(path);
      if (!leftOver()) readFormat(path);
      unlock = lock(path);
    } catch (error) {
      throw refusal(error, path);
    }
    try {
      if (leftOver()) removeLeftovers(path, options);
      // Read again under the lock: another serve may have created the state meanwhile.
      sandboxId = readFormat(path);
      tightenPermissions(path);
    } catch (error) {
      unlock();
      throw refusal(error, path);
    }
  }
  return {
    path,
    persistent,
    databasePath: join(path, 'sandbox.db'),
    sandboxId,
    markCreated(id) {
      sandboxId = id;
      writeFormat(path, id);
    },
    announce(where) {
      if (persistent) writeAnnouncement(path, where);
    },
    release() {
      if (persistent) {
        rmSync(join(path, ANNOUNCE_FILE), { force: true });
        unlock();
      } else rmSync(path, { recursive: true, force: true });
    },
  };
}

function openTemporaryIn(path: string, options: OpenStateDirOptions): StateDir {
  let unlock: () => void;
  try {
    createDirectory(path);
    unlock = lock(path);
  } catch (error) {
    throw refusal(error, path);
  }
  try {
    const held = readdirSync(path).filter((name) => !KEPT_WHEN_EMPTIED.has(name));
    if (held.length > 0 && !existsSync(join(path, TEMPORARY_MARK))) {
      throw new StateDirError(
        `--from: ${path} holds a sandbox (of \`agentctl serve --detach\`), which is never overwritten; give --state a new or empty directory, or remove ${path}`,
      );
    }
    if (held.length > 0) removeLeftovers(path, options);
    writeFileAtomically(join(path, TEMPORARY_MARK), '');
    tightenPermissions(path);
  } catch (error) {
    unlock();
    throw refusal(error, path);
  }
  return {
    path,
    persistent: false,
    databasePath: join(path, 'sandbox.db'),
    sandboxId: undefined,
    markCreated: (id) => writeFormat(path, id),
    announce: (where) => writeAnnouncement(path, where),
    release() {
      // The announcement first: from now on `serve status` no longer sends anyone here.
      rmSync(join(path, ANNOUNCE_FILE), { force: true });
      emptyTemporary(path);
      rmSync(join(path, TEMPORARY_MARK), { force: true });
      unlock();
    },
  };
}

/** The format file, which names the sandbox once its first start has succeeded. */
function writeFormat(path: string, sandboxId: string): void {
  writeFileAtomically(
    join(path, FORMAT_FILE),
    `${JSON.stringify({ format: STATE_FORMAT, sandbox_id: sandboxId })}\n`,
  );
}

/** Where the running serve listens, for `serve status`. */
function writeAnnouncement(path: string, where: { url: string; rpc_url: string }): void {
  writeFileAtomically(
    join(path, ANNOUNCE_FILE),
    `${JSON.stringify({ pid: process.pid, ...where })}\n`,
  );
}

/** Under the lock: removes what a killed temporary sandbox left in `path`, its mark last. */
function removeLeftovers(path: string, options: OpenStateDirOptions): void {
  options.stopAnvils(path);
  emptyTemporary(path);
  rmSync(join(path, TEMPORARY_MARK), { force: true });
}

/** Removes all of a temporary sandbox's dir but its lock, pid file, log and mark. */
function emptyTemporary(path: string): void {
  for (const name of readdirSync(path)) {
    if (!KEPT_WHEN_EMPTIED.has(name)) rmSync(join(path, name), { recursive: true, force: true });
  }
}

/**
 * Creates `path` and its missing parents (0700), or says which one cannot be made and why.
 * Not mkdirSync's `recursive`: it spins forever where mkdir answers ENOENT under a directory
 * that exists (/proc/x/y, say).
 */
function createDirectory(path: string): void {
  const missing: string[] = [];
  let existing = path;
  while (!existsSync(existing) && dirname(existing) !== existing) {
    missing.unshift(existing);
    existing = dirname(existing);
  }
  const cannotCreate = (reason: string) =>
    new StateDirError(
      `cannot create the state directory ${path}: ${reason}; choose another --state directory`,
    );
  if (!isDirectory(existing)) {
    throw missing.length === 0
      ? new StateDirError(`${path} is not a directory; give --state a directory`)
      : cannotCreate(`${existing} is not a directory`);
  }
  for (const dir of missing) {
    try {
      mkdirSync(dir, { mode: 0o700 });
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === 'EEXIST' && isDirectory(dir)) continue;
      const parent = dirname(dir);
      const reasons: Record<string, string> = {
        EACCES: `you may not create ${basename(dir)} in ${parent}`,
        EPERM: `you may not create ${basename(dir)} in ${parent}`,
        EROFS: `${parent} is on a read-only file system`,
        ENOENT: `${parent} does not take new directories`,
        ENOSPC: `no space is left on the device of ${parent}`,
        EEXIST: `${dir} exists and is not a directory`,
      };
      throw cannotCreate(`${reasons[code ?? ''] ?? `${dir} cannot be made`} (mkdir: ${code})`);
    }
  }
}

function isDirectory(path: string): boolean {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false;
  }
}

/**
 * Any failure opening the state dir as a refusal that names the file and says what to do,
 * rather than a bare errno.
 */
function refusal(error: unknown, path: string): unknown {
  if (error instanceof StartupError) return error;
  if (isFileError(error)) return new StateDirError(fileErrorMessage(error, path));
  return new StateDirError(
    `cannot open the state directory ${path}: ${(error as Error)?.message ?? String(error)}; check it, or choose another --state directory`,
  );
}

/** The sandbox id the format file names; undefined for a dir that is new (or whose first start was cut short). */
function readFormat(path: string): string | undefined {
  const formatPath = join(path, FORMAT_FILE);
  if (!existsSync(formatPath)) {
    const foreign = readdirSync(path).filter((name) => !FIRST_START_FILES.has(name));
    if (foreign.length > 0) {
      throw new StateDirError(
        `${path} is not empty and is not an agentctl state directory; give --state an empty or new directory`,
      );
    }
    return undefined;
  }
  // A file that cannot be read at all (another user's, say) is reported as such by the caller.
  const text = readFileSync(formatPath, 'utf8');
  let parsed: { format?: unknown; sandbox_id?: unknown } | null;
  try {
    parsed = JSON.parse(text);
  } catch {
    parsed = null;
  }
  if (typeof parsed !== 'object' || parsed === null) {
    throw new StateDirError(`${formatPath} is unreadable; is ${path} an agentctl state directory?`);
  }
  if (parsed.format !== STATE_FORMAT) {
    throw new StateDirError(
      `state directory ${path} has format version ${String(parsed.format)}, but this agentctl uses format ${STATE_FORMAT}` +
        (parsed.format === 2
          ? ' (a chain checkpoint plus a write-ahead log, where format 2 rewrote one snapshot on every write) and cannot convert it'
          : '') +
        (parsed.format === 3
          ? ' (its contracts log every yield accrual and its configurable vault is ERC-7540; the contracts of a format 3 chain cannot be replaced in place)'
          : '') +
        '; use a matching agentctl or start with a new --state directory',
    );
  }
  if (typeof parsed.sandbox_id !== 'string' || parsed.sandbox_id.length === 0) {
    throw new StateDirError(
      `${formatPath} names no sandbox; is ${path} an agentctl state directory?`,
    );
  }
  return parsed.sandbox_id;
}

/** What `serve status` and `serve stop` know of the serve using a state dir. */
export interface RunningServe {
  pid: number | undefined;
  url: string | undefined;
  rpc_url: string | undefined;
}

/**
 * The serve using `path`, or undefined when none holds its lock. The lock, not the pid file,
 * decides: the kernel drops it when the process dies, so a stale pid file never says "running".
 */
export function serveUsing(path: string): RunningServe | undefined {
  const lockPath = join(path, LOCK_FILE);
  if (!existsSync(lockPath)) return undefined;
  const db = new DatabaseSync(lockPath, { timeout: 0 });
  try {
    db.exec('BEGIN EXCLUSIVE');
    db.exec('ROLLBACK');
    return undefined;
  } catch {
    const read = (file: string) => {
      try {
        return readFileSync(join(path, file), 'utf8');
      } catch {
        return undefined;
      }
    };
    let announced: Partial<RunningServe> = {};
    try {
      announced = JSON.parse(read(ANNOUNCE_FILE) ?? '{}');
    } catch {
      // Being written right now.
    }
    const pid = Number(read(PID_FILE)?.trim());
    return {
      pid: Number.isInteger(pid) && pid > 0 ? pid : undefined,
      url: announced.url,
      rpc_url: announced.rpc_url,
    };
  } finally {
    db.close();
  }
}

/** Takes the dir's lock, or says which serve holds it. Returns the function that drops it. */
function lock(path: string): () => void {
  const lockPath = join(path, LOCK_FILE);
  const pidPath = join(path, PID_FILE);
  closeSync(openSync(lockPath, 'a', 0o600));
  const db = new DatabaseSync(lockPath, { timeout: 0 });
  try {
    db.exec('PRAGMA journal_mode = MEMORY; PRAGMA locking_mode = EXCLUSIVE; BEGIN EXCLUSIVE');
  } catch {
    db.close();
    let holder = '';
    try {
      const pid = Number(readFileSync(pidPath, 'utf8').trim());
      if (Number.isInteger(pid) && pid > 0) holder = ` (pid ${pid})`;
    } catch {
      // It has not written its pid yet.
    }
    throw new StateDirError(`another agentctl serve${holder} is using ${path}`);
  }
  writeFileAtomically(pidPath, `${process.pid}\n`);
  return () => {
    rmSync(pidPath, { force: true });
    db.exec('ROLLBACK');
    db.close();
  };
}

/** Files 0600 and directories 0700, whatever an earlier version or a restore left. */
function tightenPermissions(path: string): void {
  chmodSync(path, 0o700);
  for (const entry of readdirSync(path, { withFileTypes: true, recursive: true })) {
    const full = join(entry.parentPath, entry.name);
    if (entry.isDirectory()) chmodSync(full, 0o700);
    else if (entry.isFile()) chmodSync(full, 0o600);
  }
}
