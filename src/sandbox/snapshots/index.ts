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
import {
  GENESIS_SNAPSHOT,
  MAX_SNAPSHOTS,
  type RestoreResult,
  type SnapshotInfo,
} from '../../api/schemas/index.ts';
import { fsyncPath } from '../../files/atomic.ts';
import {
  CHECKPOINT_FORMAT,
  type Checkpoint,
  chainDir,
  checkpointPath,
} from '../chain/checkpoint.ts';
import { GENESIS } from '../chain/genesis.ts';
import type { BlockHead } from '../chain/producer.ts';
import { type ChainCopy, META_CHECKPOINT } from '../chain/restore.ts';
import type { SandboxClock } from '../clock.ts';
import { HttpError, StartupError } from '../errors.ts';
import { crashAt } from '../faults.ts';
import { removeIndexFiles } from '../indexer/schema.ts';
import type { Store } from '../store/index.ts';
import { exportSnapshot } from './export-file.ts';
import {
  clearRestoring,
  commitSnapshot,
  listSnapshots,
  markRestoring,
  newSnapshotDir,
  pendingRestore,
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

/**
 * Snapshots of the whole sandbox and restores to them: the chain, sandbox.db, index.db and
 * the clock, consistent at one block. A snapshot copies all three while no block is made
 * (the chain dumped, the databases copied in the same pause); a restore stops the chain,
 * puts the snapshot's rows, checkpoint and index in place, and starts the chain again from
 * them. See docs/state-directory.md ("Snapshots").
 */

/** What snapshots need of the running sandbox (runtime.ts wires them). */
export interface SnapshotDeps {
  stateDir: string;
  sandboxId: string;
  store: Store;
  clock: SandboxClock;
  chain: {
    copyChainWith<T>(
      alongside: (at: BlockHead) => Promise<T>,
    ): Promise<{ copy: ChainCopy; value: T }>;
    replace(swap: () => Promise<void>): Promise<BlockHead>;
  };
  index: {
    syncTo(block?: number): Promise<void>;
    checkpoint(): { number: number; hash: string } | undefined;
    copyTo(path: string): Promise<boolean>;
    replaceWith(from: string | undefined): Promise<void>;
  };
  /** Stops whoever writes on their own (the onboarder, the fulfiller) for the restore. */
  pauseOperators(): Promise<void>;
  /** After a restore (or a failed one): everything kept in memory is read again, operators start. */
  afterRestore(): Promise<void>;
}

/**
 * What the service adds once it is built: how it holds writes during a restore. The release
 * takes a reason when the restore stopped half way: writes are then refused with it for good
 * (a restart finishes the restore).
 */
type HoldWrites = () => Promise<(stillRefused?: string) => void>;

export function createSnapshots(deps: SnapshotDeps) {
  const { stateDir, store } = deps;
  /** Until the service says how (its write gate), nothing is held. */
  let holdWrites: HoldWrites = async () => () => {};
  const restored = new Set<() => void>();
  /** One snapshot, restore or delete at a time. */
  let queue: Promise<unknown> = Promise.resolve();
  const serially = <T>(work: () => Promise<T>): Promise<T> => {
    const next = queue.then(work, work);
    queue = next.catch(() => undefined);
    return next;
  };
  /** Nothing is taken or restored over a restore that stopped half way: a restart finishes it. */
  const refuseWhileUnfinished = () => {
    const pending = pendingRestore(stateDir);
    if (pending !== undefined) {
      throw new HttpError(
        503,
        `a restore of snapshot ${pending} is unfinished: restart serve, which finishes it`,
      );
    }
  };

  const info = (meta: SnapshotMeta, size: number): SnapshotInfo => ({
    name: meta.name,
    block_number: meta.block_number,
    created_at: new Date(meta.created_at * 1000).toISOString(),
    size_bytes: size,
  });

  function list(): SnapshotInfo[] {
    return [genesisInfo(), ...listSnapshots(stateDir).map((meta) => info(meta, meta.size_bytes))];
  }

  function take(name: string, replace: boolean): Promise<SnapshotInfo> {
    return serially(async () => {
      if (name === GENESIS_SNAPSHOT) {
        throw new HttpError(
          409,
          'genesis is built in (a new, empty sandbox): it cannot be replaced',
        );
      }
      const existing = readSnapshotMeta(stateDir, name);
      // On a file system that does not tell case apart (macOS), Base is base's directory.
      const sameDir = !existing && existsSync(snapshotDir(stateDir, name));
      const other = sameDir
        ? listSnapshots(stateDir).find((entry) => entry.name.toLowerCase() === name.toLowerCase())
        : undefined;
      if (other) {
        throw new HttpError(
          409,
          `a snapshot named ${other.name} exists, and this file system does not tell names apart by case: choose another name`,
        );
      }
      if (existing && !replace) {
        throw new HttpError(
          409,
          `a snapshot named ${name} exists; pass "replace": true to take it again`,
        );
      }
      if (!existing && listSnapshots(stateDir).length >= MAX_SNAPSHOTS) {
        throw new HttpError(
          409,
          `this sandbox keeps at most ${MAX_SNAPSHOTS} snapshots; delete one first`,
        );
      }
      refuseWhileUnfinished();
      const dir = newSnapshotDir(stateDir, name);
      try {
        const { copy, value: indexed } = await deps.chain.copyChainWith(async (at) => {
          // The index catches up with the block dumped, then both databases are copied in
          // this same pause: no block comes between them.
          const upToDate = await deps.index
            .syncTo(at.number)
            .then(() => deps.index.checkpoint()?.hash === at.hash)
            .catch(() => false);
          await store.copyTo(join(dir, SNAPSHOT_DB));
          return upToDate ? deps.index.copyTo(join(dir, SNAPSHOT_INDEX)) : false;
        });
        if (!indexed) rmSync(join(dir, SNAPSHOT_INDEX), { force: true });
        startsAt(join(dir, SNAPSHOT_DB), { block: copy.block_number, hash: copy.block_hash });
        const chain: Checkpoint = {
          format: CHECKPOINT_FORMAT,
          sandbox_id: deps.sandboxId,
          chain_id: GENESIS.chain_id,
          block_number: copy.block_number,
          block_hash: copy.block_hash,
          block_timestamp: copy.block_timestamp,
          deployment: copy.deployment,
          state: copy.state,
        };
        writeFileSync(join(dir, SNAPSHOT_CHAIN), JSON.stringify(chain), { mode: 0o600 });
        const meta: SnapshotMeta = {
          format: 1,
          name,
          sandbox_id: deps.sandboxId,
          block_number: copy.block_number,
          block_hash: copy.block_hash,
          created_at: deps.clock.nowSeconds(),
        };
        await commitSnapshot(stateDir, dir, meta);
        return info(meta, sizeOf(snapshotDir(stateDir, name)));
      } catch (error) {
        // A full disk, the chain being rebuilt: said, never a 500. Nothing was kept.
        if (error instanceof HttpError) throw error;
        throw new HttpError(503, `snapshot ${name} was not taken: ${(error as Error).message}`);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });
  }

  function restore(name: string): Promise<RestoreResult> {
    return serially(async () => {
      if (name !== GENESIS_SNAPSHOT && !readSnapshotMeta(stateDir, name)) {
        throw new HttpError(404, `no snapshot is named ${name}`);
      }
      refuseWhileUnfinished();
      const started = performance.now();
      // What can be refused is refused before anything changes: rows of another schema, a
      // chain file that cannot be read or linked.
      await stageRestore(stateDir, store, name);
      const release = await holdWrites();
      /** Set when the restore stopped half way: writes stay refused until a restart finishes it. */
      let unfinished: string | undefined;
      try {
        await deps.pauseOperators();
        let head: BlockHead;
        try {
          head = await deps.chain.replace(async () => {
            crashAt('crash-before-restore');
            markRestoring(stateDir, name);
            crashAt('crash-in-restore');
            try {
              await putInPlace(stateDir, store, name, (from) => deps.index.replaceWith(from));
            } catch (error) {
              // Refused before anything changed: there is nothing for a start to finish.
              if (error instanceof RowsNotReplacedError) clearRestoring(stateDir);
              throw error;
            }
            clearRestoring(stateDir);
          });
        } catch (error) {
          const why = (error as Error).message;
          if (pendingRestore(stateDir) === undefined) {
            throw new HttpError(503, `restoring ${name} failed: ${why}; nothing was restored`);
          }
          unfinished = `a restore of snapshot ${name} stopped half way (${why}); nothing is written until serve is restarted, which finishes it`;
          throw new HttpError(503, unfinished);
        } finally {
          await deps.afterRestore();
          for (const listener of restored) {
            try {
              listener();
            } catch {
              // A listener only schedules work; one that throws does not stop the others.
            }
          }
        }
        return {
          name,
          block_number: head.number,
          restored_in_ms: Math.round((performance.now() - started) * 10) / 10,
        };
      } finally {
        release(unfinished);
      }
    });
  }

  function remove(name: string): Promise<void> {
    return serially(async () => {
      if (name === GENESIS_SNAPSHOT) {
        throw new HttpError(
          409,
          'genesis is built in (a new, empty sandbox): it cannot be deleted',
        );
      }
      if (pendingRestore(stateDir) === name) {
        throw new HttpError(
          409,
          `a restore of ${name} is unfinished (restart serve to finish it): it cannot be deleted now`,
        );
      }
      if (!removeSnapshot(stateDir, name)) throw new HttpError(404, `no snapshot is named ${name}`);
    });
  }

  /** Snapshot `name` as an export file's bytes, one export at a time (each is held in memory). */
  function exportFile(name: string): Promise<Buffer> {
    return serially(async () => exportSnapshot(stateDir, name));
  }

  return {
    list,
    take,
    restore,
    remove,
    exportFile,
    /** How the service refuses writes (503) and waits for those running, during a restore. */
    holdWritesWith(hold: HoldWrites): void {
      holdWrites = hold;
    },
    /** Calls `listener` after each restore (GraphQL closes its subscription sockets). */
    onRestored(listener: () => void): () => void {
      restored.add(listener);
      return () => restored.delete(listener);
    },
  };
}
export type Snapshots = ReturnType<typeof createSnapshots>;

/** sandbox.db's rows could not be replaced (all or nothing): the state is unchanged. */
class RowsNotReplacedError extends Error {}

/** Genesis, listed first: the built-in chain, no agents. */
function genesisInfo(): SnapshotInfo {
  return {
    name: GENESIS_SNAPSHOT,
    block_number: GENESIS.block_number,
    created_at: new Date(GENESIS.block_timestamp * 1000).toISOString(),
    size_bytes: 0,
  };
}

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
): Promise<void> {
  const genesis = name === GENESIS_SNAPSHOT;
  const dir = snapshotDir(stateDir, name);
  try {
    await store.replaceFrom(genesis ? undefined : join(dir, SNAPSHOT_DB));
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
    await putInPlace(stateDir, store, name, async (from) => {
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
    });
  } catch (error) {
    throw new StartupError(
      `finishing the restore of snapshot ${name} (${join(stateDir, 'restoring.json')}) failed: ${(error as Error).message}`,
    );
  }
  clearRestoring(stateDir);
}
