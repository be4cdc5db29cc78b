import {
  chmodSync,
  copyFileSync,
  existsSync,
  linkSync,
  mkdirSync,
  readdirSync,
  renameSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { GENESIS_SNAPSHOT } from '../../api/schemas/index.ts';
import { fsyncPath } from '../../files/atomic.ts';
import { chainDir, checkpointPath } from '../chain/checkpoint.ts';
import { META_CHECKPOINT } from '../chain/restore.ts';
import { HttpError, StartupError } from '../errors.ts';
import { crashAt } from '../faults.ts';
import { removeIndexFiles } from '../indexer/schema.ts';
import type { IdempotencyRow } from '../store/idempotency.ts';
import type { Store } from '../store/index.ts';
import { exportSnapshot } from './export-file.ts';
import {
  clearRestoring,
  commitSnapshot,
  listSnapshots,
  markRestoring,
  newSnapshotDir,
  pendingRestore,
  pendingRestoreKeys,
  readSnapshotMeta,
  recoverSnapshotDirs,
  removeSnapshot,
  SNAPSHOT_CHAIN,
  SNAPSHOT_DB,
  SNAPSHOT_INDEX,
  type SnapshotMeta,
  sizeOf,
  snapshotDir,
} from './files.ts';
import type { SnapshotStorage, SnapshotWriter } from './storage.ts';

/**
 * Snapshots in the state dir (`--state`): STATE/snapshots/NAME/, files written once (see
 * files.ts). A restore puts sandbox.db's rows, chain/'s checkpoint and index.db in place one
 * after the other, with restoring.json saying so: a start that finds it finishes the restore
 * (resumeRestore).
 */
export function directorySnapshots(deps: {
  stateDir: string;
  store: Store;
  index: {
    copyTo(path: string): Promise<boolean>;
    replaceWith(from: string | undefined): Promise<void>;
  };
}): SnapshotStorage {
  const { stateDir, store, index } = deps;
  return {
    list: async () => listSnapshots(stateDir),
    read: async (name) => readSnapshotMeta(stateDir, name),
    async begin(name) {
      // On a file system that does not tell case apart (macOS), Base is base's directory.
      const sameDir = !readSnapshotMeta(stateDir, name) && existsSync(snapshotDir(stateDir, name));
      const other = sameDir
        ? listSnapshots(stateDir).find((entry) => entry.name.toLowerCase() === name.toLowerCase())
        : undefined;
      if (other) {
        throw new HttpError(
          409,
          `a snapshot named ${other.name} exists, and this file system does not tell names apart by case: choose another name`,
        );
      }
      return directoryWriter(stateDir, store, index, newSnapshotDir(stateDir, name));
    },
    unfinished: () => pendingRestore(stateDir),
    prepareRestore: (name) => stageRestore(stateDir, store, name),
    async putInPlace(name, keys) {
      crashAt('crash-before-restore');
      markRestoring(stateDir, name, keys);
      crashAt('crash-in-restore');
      try {
        await putInPlace(stateDir, store, name, (from) => index.replaceWith(from), keys);
      } catch (error) {
        // Refused before anything changed: there is nothing for a start to finish.
        if (error instanceof RowsNotReplacedError) clearRestoring(stateDir);
        throw error;
      }
      clearRestoring(stateDir);
    },
    remove: async (name) => removeSnapshot(stateDir, name),
    exportFile: async (name) => exportSnapshot(stateDir, name),
  };
}

function directoryWriter(
  stateDir: string,
  store: Store,
  index: { copyTo(path: string): Promise<boolean> },
  dir: string,
): SnapshotWriter {
  return {
    async copyState(_at, indexUpToDate) {
      await store.copyTo(join(dir, SNAPSHOT_DB));
      const indexed = indexUpToDate && (await index.copyTo(join(dir, SNAPSHOT_INDEX)));
      if (!indexed) rmSync(join(dir, SNAPSHOT_INDEX), { force: true });
      return indexed;
    },
    async commit(chain, meta) {
      startsAt(join(dir, SNAPSHOT_DB), { block: chain.block_number, hash: chain.block_hash });
      writeFileSync(join(dir, SNAPSHOT_CHAIN), JSON.stringify(chain), { mode: 0o600 });
      await commitSnapshot(stateDir, dir, meta);
      return sizeOf(snapshotDir(stateDir, meta.name));
    },
    async abandon() {
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** sandbox.db's rows could not be replaced (all or nothing): the state is unchanged. */
class RowsNotReplacedError extends Error {}

/**
 * A copy of sandbox.db made the start of a snapshot: its checkpoint pointer at the snapshot's
 * block (whose chain is chain.json), its chain log empty, and no admin token.
 */
function startsAt(path: string, pointer: { block: number; hash: string }): void {
  const db = new DatabaseSync(path);
  try {
    db.exec('BEGIN');
    db.prepare('INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)').run(
      META_CHECKPOINT,
      JSON.stringify(pointer),
    );
    db.exec("DELETE FROM meta WHERE key = 'admin_token_sha256'");
    db.exec('DELETE FROM chain_blocks');
    db.exec('COMMIT');
  } finally {
    db.close();
  }
}

/** Where a restore puts the snapshot's chain beside chain/'s checkpoint before it commits to it. */
function stagedChainPath(stateDir: string): string {
  // Ends in .tmp: a start removes it unless a restore is to be finished (removeCheckpointsExcept).
  return join(chainDir(stateDir), 'restoring-checkpoint.json.tmp');
}

/**
 * Before a restore changes anything: checks that the snapshot's rows fit sandbox.db (a
 * RowsNotReplacedError, as a 409, when they do not) and puts its chain file beside chain/'s
 * checkpoint under a temporary name (a link: snapshot files are never changed).
 */
async function stageRestore(stateDir: string, store: Store, name: string): Promise<void> {
  if (name === GENESIS_SNAPSHOT) return;
  const dir = snapshotDir(stateDir, name);
  try {
    await store.checkReplaceable(join(dir, SNAPSHOT_DB));
  } catch (error) {
    throw new HttpError(
      409,
      `snapshot ${name} cannot be restored: its sandbox.db ${(error as Error).message}; nothing was changed`,
    );
  }
  mkdirSync(chainDir(stateDir), { recursive: true, mode: 0o700 });
  const staged = stagedChainPath(stateDir);
  rmSync(staged, { force: true });
  try {
    linkSync(join(dir, SNAPSHOT_CHAIN), staged);
  } catch {
    copyFileSync(join(dir, SNAPSHOT_CHAIN), staged);
  }
}

/**
 * Puts snapshot `name` in place of the state: sandbox.db's rows (but its identity and admin
 * token), the chain's checkpoint (chain/ holds only the snapshot's) and index.db. Each part
 * may be put again: a start that finds restoring.json does it all again (see resumeRestore).
 */
async function putInPlace(
  stateDir: string,
  store: Store,
  name: string,
  replaceIndex: (from: string | undefined) => Promise<void>,
  keys: IdempotencyRow[] = [],
): Promise<void> {
  const genesis = name === GENESIS_SNAPSHOT;
  const dir = snapshotDir(stateDir, name);
  try {
    // The restore's own key goes in with the rows: a start that finishes the restore keeps it
    // (it outlives restores), and a retry is answered rather than restoring again.
    await store.replaceFrom(genesis ? undefined : join(dir, SNAPSHOT_DB), keys);
  } catch (error) {
    throw new RowsNotReplacedError(
      `snapshot ${name} cannot be restored: its sandbox.db ${(error as Error).message}`,
    );
  }
  await store.sync();
  const chain = chainDir(stateDir);
  mkdirSync(chain, { recursive: true, mode: 0o700 });
  const staged = stagedChainPath(stateDir);
  for (const file of readdirSync(chain)) {
    if (join(chain, file) !== staged) rmSync(join(chain, file), { force: true });
  }
  if (!genesis) {
    const meta = readSnapshotMeta(stateDir, name) as SnapshotMeta;
    const target = checkpointPath(stateDir, meta.block_number);
    // Staged before the restore began; a start that finishes one after it was renamed links
    // it again. Snapshot files are never changed, and a checkpoint is replaced by renaming:
    // a link is a copy that costs nothing.
    if (existsSync(staged)) renameSync(staged, target);
    else {
      try {
        linkSync(join(dir, SNAPSHOT_CHAIN), target);
      } catch {
        copyFileSync(join(dir, SNAPSHOT_CHAIN), target);
      }
    }
  } else rmSync(staged, { force: true });
  fsyncPath(chain);
  fsyncPath(stateDir);
  const index = join(dir, SNAPSHOT_INDEX);
  await replaceIndex(!genesis && existsSync(index) ? index : undefined);
}

/**
 * At start, before the chain and the index open: finishes the restore a crash interrupted
 * (restoring.json), so that the state is the snapshot's whole; and tidies snapshot dirs a
 * crash left half written. `indexPath` is index.db's.
 */
export async function resumeRestore(
  stateDir: string,
  store: Store,
  indexPath: string,
): Promise<void> {
  recoverSnapshotDirs(stateDir);
  const name = pendingRestore(stateDir);
  if (name === undefined) return;
  if (name !== GENESIS_SNAPSHOT && !readSnapshotMeta(stateDir, name)) {
    // serve --from says what it restores before it writes the snapshot: it was cut short.
    throw new StartupError(
      `${stateDir} was being set up from snapshot ${name} (serve --from, or a restore), which was cut short before the snapshot was written; ` +
        'start with a new --state directory (or delete this one and run serve --from again)',
    );
  }
  try {
    await putInPlace(
      stateDir,
      store,
      name,
      async (from) => {
        removeIndexFiles(indexPath);
        if (from !== undefined) {
          // A copy that fails leaves no index.db: it is rebuilt from the chain.
          try {
            copyFileSync(from, indexPath);
            chmodSync(indexPath, 0o600);
          } catch {
            removeIndexFiles(indexPath);
          }
        }
      },
      // A keyed restore's key, said beside its name: it goes in with the rows now.
      pendingRestoreKeys(stateDir),
    );
  } catch (error) {
    throw new StartupError(
      `finishing the restore of snapshot ${name} (${join(stateDir, 'restoring.json')}) failed: ${(error as Error).message}`,
    );
  }
  clearRestoring(stateDir);
}
