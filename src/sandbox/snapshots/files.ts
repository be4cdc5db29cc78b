import { randomBytes } from 'node:crypto';
import {
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { open } from 'node:fs/promises';
import { join } from 'node:path';
import { GENESIS_SNAPSHOT, SNAPSHOT_NAME_PATTERN } from '../../api/schemas/index.ts';
import { fsyncPath } from '../../files/atomic.ts';
import type { IdempotencyRow } from '../store/idempotency.ts';

/**
 * Snapshots on disk: `STATE/snapshots/NAME/` (0700), each a directory of files written once
 * and never changed:
 *   snapshot.json  what it is (SnapshotMeta)
 *   sandbox.db     a copy of sandbox.db, its checkpoint pointer at the snapshot's block and
 *                  its chain log empty
 *   index.db       a copy of index.db at that block (absent when the index had failed: it is
 *                  then indexed again from the chain)
 *   chain.json     the chain at that block, as a checkpoint file (chain/checkpoint.ts)
 * A snapshot is written into `STATE/snapshot-work/new-NAME-*` and renamed into place; one it
 * replaces or a delete removes is first renamed to `snapshot-work/old-NAME-*`.
 * `STATE/restoring.json` names the snapshot a restore is putting in place: a start that finds
 * it finishes that restore first.
 */

export const SNAPSHOTS_DIR = 'snapshots';
export const SNAPSHOT_META = 'snapshot.json';
export const SNAPSHOT_DB = 'sandbox.db';
export const SNAPSHOT_INDEX = 'index.db';
export const SNAPSHOT_CHAIN = 'chain.json';
const WORK_DIR = 'snapshot-work';
const RESTORING = 'restoring.json';
const SNAPSHOT_FORMAT = 1;

export interface SnapshotMeta {
  format: number;
  name: string;
  sandbox_id: string;
  block_number: number;
  block_hash: string;
  /** Sandbox time, Unix seconds. */
  created_at: number;
}

export function snapshotsDir(stateDir: string): string {
  return join(stateDir, SNAPSHOTS_DIR);
}

export function snapshotDir(stateDir: string, name: string): string {
  return join(snapshotsDir(stateDir), name);
}

/** The snapshots on disk, by name (genesis, which is built in, is not among them). */
export function listSnapshots(stateDir: string): Array<SnapshotMeta & { size_bytes: number }> {
  const dir = snapshotsDir(stateDir);
  if (!existsSync(dir)) return [];
  return readdirSync(dir)
    .filter((name) => SNAPSHOT_NAME_PATTERN.test(name) && name !== GENESIS_SNAPSHOT)
    .filter((name) => name !== '.' && name !== '..')
    .flatMap((name) => {
      const meta = readSnapshotMeta(stateDir, name);
      return meta ? [{ ...meta, size_bytes: sizeOf(snapshotDir(stateDir, name)) }] : [];
    })
    .sort((a, b) => a.created_at - b.created_at || a.name.localeCompare(b.name));
}

/** A snapshot's description, or undefined when there is none of that name. */
export function readSnapshotMeta(stateDir: string, name: string): SnapshotMeta | undefined {
  const path = join(snapshotDir(stateDir, name), SNAPSHOT_META);
  if (!existsSync(path)) return undefined;
  try {
    const meta = JSON.parse(readFileSync(path, 'utf8')) as SnapshotMeta;
    return meta.format === SNAPSHOT_FORMAT && meta.name === name ? meta : undefined;
  } catch {
    return undefined;
  }
}

export function sizeOf(dir: string): number {
  return readdirSync(dir).reduce((total, file) => total + statSync(join(dir, file)).size, 0);
}

/** A new directory to write a snapshot's files into, before commitSnapshot names it. */
export function newSnapshotDir(stateDir: string, name: string): string {
  mkdirSync(snapshotsDir(stateDir), { recursive: true, mode: 0o700 });
  const dir = join(workDir(stateDir), `new-${name}-${randomBytes(4).toString('hex')}`);
  mkdirSync(dir, { mode: 0o700 });
  return dir;
}

/** Where snapshots are written before they are named, and removed after. */
function workDir(stateDir: string): string {
  const dir = join(stateDir, WORK_DIR);
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  return dir;
}

/**
 * Writes snapshot.json into `dir`, fsyncs every file and the directory, and renames it to
 * NAME, in place of the snapshot of that name if there is one. Crash-safe: the old snapshot
 * stays until the new one is in place (see recoverSnapshotDirs).
 */
export async function commitSnapshot(
  stateDir: string,
  dir: string,
  meta: SnapshotMeta,
): Promise<void> {
  writeFileSync(join(dir, SNAPSHOT_META), JSON.stringify({ ...meta, format: SNAPSHOT_FORMAT }), {
    mode: 0o600,
  });
  // On the thread pool, all at once: the file system commits them together.
  await Promise.all([...readdirSync(dir).map((file) => join(dir, file)), dir].map(syncPath));
  const target = snapshotDir(stateDir, meta.name);
  let old: string | undefined;
  if (existsSync(target)) {
    old = join(workDir(stateDir), `old-${meta.name}-${randomBytes(4).toString('hex')}`);
    renameSync(target, old);
  }
  renameSync(dir, target);
  await syncPath(snapshotsDir(stateDir));
  if (old) rmSync(old, { recursive: true, force: true });
}

/** Removes snapshot NAME; false when there is none. */
export function removeSnapshot(stateDir: string, name: string): boolean {
  const target = snapshotDir(stateDir, name);
  if (!readSnapshotMeta(stateDir, name)) return false;
  const doomed = join(workDir(stateDir), `del-${name}-${randomBytes(4).toString('hex')}`);
  renameSync(target, doomed);
  fsyncPath(snapshotsDir(stateDir));
  rmSync(doomed, { recursive: true, force: true });
  return true;
}

/**
 * At start: drops what a crash left half written, and puts back a snapshot whose replacement
 * never got into place.
 */
export function recoverSnapshotDirs(stateDir: string): void {
  const work = join(stateDir, WORK_DIR);
  if (!existsSync(work)) return;
  const root = snapshotsDir(stateDir);
  for (const entry of readdirSync(work)) {
    const old = /^old-(.+)-[0-9a-f]{8}$/.exec(entry);
    if (old?.[1] && !existsSync(join(root, old[1]))) {
      renameSync(join(work, entry), join(root, old[1]));
    } else {
      rmSync(join(work, entry), { recursive: true, force: true });
    }
  }
}

/** The restore a crash interrupted: the snapshot it was putting in place. */
export function pendingRestore(stateDir: string): string | undefined {
  const path = join(stateDir, RESTORING);
  if (!existsSync(path)) return undefined;
  return (JSON.parse(readFileSync(path, 'utf8')) as { name: string }).name;
}

/**
 * The idempotency keys the interrupted restore was to put in with the snapshot's rows (a keyed
 * restore's own): a start that finishes it puts them in, so that a retry is answered rather
 * than restoring again. Their answers are sealed (plugins/idempotency.ts).
 */
export function pendingRestoreKeys(stateDir: string): IdempotencyRow[] {
  const path = join(stateDir, RESTORING);
  if (!existsSync(path)) return [];
  const { keys = [] } = JSON.parse(readFileSync(path, 'utf8')) as {
    keys?: Array<Omit<IdempotencyRow, 'answer'> & { answer: string }>;
  };
  return keys.map((key) => ({ ...key, answer: Buffer.from(key.answer, 'base64') }));
}

/**
 * Says, on disk, that snapshot `name` is being put in place (see pendingRestore), with the
 * keys to put in with its rows (see pendingRestoreKeys).
 */
export function markRestoring(stateDir: string, name: string, keys: IdempotencyRow[] = []): void {
  const temp = join(stateDir, `${RESTORING}.tmp`);
  const stored = keys.map((key) => ({
    ...key,
    answer: Buffer.from(key.answer).toString('base64'),
  }));
  writeFileSync(temp, JSON.stringify({ name, ...(stored.length > 0 && { keys: stored }) }), {
    mode: 0o600,
  });
  fsyncPath(temp);
  renameSync(temp, join(stateDir, RESTORING));
  fsyncPath(stateDir);
}

/** The restore is done: durably, so that a start does not put the snapshot back again. */
export function clearRestoring(stateDir: string): void {
  rmSync(join(stateDir, RESTORING), { force: true });
  fsyncPath(stateDir);
}

async function syncPath(path: string): Promise<void> {
  const handle = await open(path, 'r');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}
