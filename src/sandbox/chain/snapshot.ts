import {
  closeSync,
  existsSync,
  fsyncSync,
  openSync,
  readFileSync,
  renameSync,
  writeFileSync,
} from 'node:fs';
import { dirname, join } from 'node:path';
import type { Hex } from 'viem';
import { StartupError } from '../errors.ts';
import type { Deployment } from './deployment.ts';

/** Bumped when the snapshot file's layout changes; other versions are refused. */
export const SNAPSHOT_FORMAT = 1;
const SNAPSHOT_FILE = 'chain-snapshot.json';

export class SnapshotError extends StartupError {}

export interface Snapshot {
  format: number;
  chain_id: number;
  saved_at: number;
  deployment: Deployment;
  /** anvil_dumpState's output: gzipped JSON of every account, storage slot and block. */
  state: Hex;
}

export function snapshotPath(stateDir: string): string {
  return join(stateDir, SNAPSHOT_FILE);
}

export function readSnapshot(stateDir: string): Snapshot | undefined {
  const path = snapshotPath(stateDir);
  if (!existsSync(path)) return undefined;
  let snapshot: Partial<Snapshot>;
  try {
    snapshot = JSON.parse(readFileSync(path, 'utf8'));
  } catch {
    throw new SnapshotError(`${path} is unreadable; the chain state cannot be restored`);
  }
  if (snapshot.format !== SNAPSHOT_FORMAT) {
    throw new SnapshotError(
      `${path} has snapshot format ${String(snapshot.format)}, but this agentctl reads format ${SNAPSHOT_FORMAT}; ` +
        'use a matching agentctl or start with a new --state directory',
    );
  }
  return snapshot as Snapshot;
}

/** Writes a temp file, fsyncs it, renames it over the snapshot and fsyncs the directory. */
export function writeSnapshot(stateDir: string, snapshot: Snapshot): void {
  const path = snapshotPath(stateDir);
  const temp = `${path}.tmp`;
  const fd = openSync(temp, 'w', 0o600);
  try {
    writeFileSync(fd, JSON.stringify(snapshot));
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  renameSync(temp, path);
  const dir = openSync(dirname(path), 'r');
  try {
    fsyncSync(dir);
  } finally {
    closeSync(dir);
  }
}

/**
 * Group commit for snapshots. `persist()` resolves once a snapshot taken after the call
 * began is on disk. Dumps run one at a time. A caller that arrives while a dump runs joins
 * the single dump queued behind it, which starts after its transactions and so covers them.
 */
export function createPersister(dump: () => Promise<void>): { persist(): Promise<void> } {
  let tail: Promise<void> = Promise.resolve();
  let queued: Promise<void> | undefined;
  return {
    persist() {
      if (queued) return queued;
      const next = tail
        .catch(() => undefined)
        .then(() => {
          // From here on, new callers need a later dump: this one may have begun reading.
          queued = undefined;
          return dump();
        });
      queued = next;
      tail = next;
      return next;
    },
  };
}
