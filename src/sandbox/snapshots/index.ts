import {
  GENESIS_SNAPSHOT,
  MAX_SNAPSHOTS,
  type RestoreResult,
  type SnapshotInfo,
} from '../../api/schemas/index.ts';
import { CHECKPOINT_FORMAT, type Checkpoint } from '../chain/checkpoint.ts';
import { GENESIS } from '../chain/genesis.ts';
import type { BlockHead } from '../chain/producer.ts';
import type { ChainCopy } from '../chain/restore.ts';
import type { SandboxClock } from '../clock.ts';
import { HttpError } from '../errors.ts';
import { crashAt } from '../faults.ts';
import type { IdempotencyRow } from '../store/idempotency.ts';
import type { SnapshotMeta } from './files.ts';
import type { SnapshotStorage } from './storage.ts';

export { resumeRestore } from './directory.ts';

/**
 * Snapshots of the whole sandbox and restores to them: the chain, the sandbox's rows, the index
 * and the clock, consistent at one block. A snapshot copies them while no block is made (the
 * chain dumped, the rows copied in the same pause); a restore stops the chain, puts the
 * snapshot's rows, checkpoint and index in place, and starts the chain again from them. Where
 * they are kept is the storage's (storage.ts): the state dir's files, or the database's
 * schemas. See docs/state-directory.md ("Snapshots").
 */

/** What snapshots need of the running sandbox (runtime.ts wires them). */
export interface SnapshotDeps {
  storage: SnapshotStorage;
  sandboxId: string;
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
  const { storage } = deps;
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
    const pending = storage.unfinished();
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

  async function list(): Promise<SnapshotInfo[]> {
    const kept = await storage.list();
    return [genesisInfo(), ...kept.map((meta) => info(meta, meta.size_bytes))];
  }

  function take(name: string, replace: boolean): Promise<SnapshotInfo> {
    return serially(async () => {
      if (name === GENESIS_SNAPSHOT) {
        throw new HttpError(
          409,
          'genesis is built in (a new, empty sandbox): it cannot be replaced',
        );
      }
      const existing = await storage.read(name);
      if (existing && !replace) {
        throw new HttpError(
          409,
          `a snapshot named ${name} exists; pass "replace": true to take it again`,
        );
      }
      if (!existing && (await storage.list()).length >= MAX_SNAPSHOTS) {
        throw new HttpError(
          409,
          `this sandbox keeps at most ${MAX_SNAPSHOTS} snapshots; delete one first`,
        );
      }
      refuseWhileUnfinished();
      const writer = await storage.begin(name);
      try {
        const { copy } = await deps.chain.copyChainWith(async (at) => {
          // The index catches up with the block dumped, then the rows and the index are
          // copied in this same pause: no block comes between them.
          const upToDate = await deps.index
            .syncTo(at.number)
            .then(() => deps.index.checkpoint()?.hash === at.hash)
            .catch(() => false);
          return writer.copyState(at, upToDate);
        });
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
        const meta: SnapshotMeta = {
          format: 1,
          name,
          sandbox_id: deps.sandboxId,
          block_number: copy.block_number,
          block_hash: copy.block_hash,
          created_at: deps.clock.nowSeconds(),
        };
        return info(meta, await writer.commit(chain, meta));
      } catch (error) {
        // A full disk, the chain being rebuilt: said, never a 500. Nothing was kept.
        if (error instanceof HttpError) throw error;
        throw new HttpError(503, `snapshot ${name} was not taken: ${(error as Error).message}`);
      } finally {
        await writer.abandon();
      }
    });
  }

  /**
   * Restores snapshot `name`. `keyOf`, for a keyed request, gives the row of its key with an
   * answer: it goes in with the snapshot's rows, in their transaction (putInPlace), so that a
   * crash after that commit leaves a key whose retry is answered, not a restore done again
   * over the writes made since. That answer is the restore's as far as its rows (the time
   * taken up to then); the route stores the final one over it once the chain is back.
   */
  function restore(
    name: string,
    keyOf: (answer: RestoreResult) => IdempotencyRow | undefined = () => undefined,
  ): Promise<RestoreResult> {
    return serially(async () => {
      const meta = name === GENESIS_SNAPSHOT ? GENESIS : await storage.read(name);
      if (!meta) throw new HttpError(404, `no snapshot is named ${name}`);
      refuseWhileUnfinished();
      const started = performance.now();
      // What can be refused is refused before anything changes: rows of another schema, a
      // chain file that cannot be read or linked.
      await storage.prepareRestore(name);
      const release = await holdWrites();
      /** Set when the restore stopped half way: writes stay refused until a restart finishes it. */
      let unfinished: string | undefined;
      /** Set once the snapshot's state is in place (and a keyed restore's key with it). */
      let swapped = false;
      try {
        await deps.pauseOperators();
        let head: BlockHead;
        try {
          head = await deps.chain.replace(async () => {
            const key = keyOf({
              name,
              block_number: meta.block_number,
              restored_in_ms: elapsedMs(started),
            });
            await storage.putInPlace(name, key ? [key] : []);
            swapped = true;
          });
          crashAt('crash-after-restore');
        } catch (error) {
          const why = (error as Error).message;
          if (swapped && storage.unfinished() === undefined) {
            // The chain failed to start from it, and was recovered from what is now in place:
            // the snapshot's. A retry with the restore's key gets its answer.
            throw new HttpError(
              503,
              `restoring ${name}: the snapshot's state is in place, but its chain had to be recovered (${why}); see GET /sandbox/info, and retry with the same Idempotency-Key for the restore's answer`,
            );
          }
          if (storage.unfinished() === undefined) {
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
        return { name, block_number: head.number, restored_in_ms: elapsedMs(started) };
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
      if (storage.unfinished() === name) {
        throw new HttpError(
          409,
          `a restore of ${name} is unfinished (restart serve to finish it): it cannot be deleted now`,
        );
      }
      if (!(await storage.remove(name))) throw new HttpError(404, `no snapshot is named ${name}`);
    });
  }

  /** Snapshot `name` as an export file's bytes, one export at a time (each is held in memory). */
  function exportFile(name: string): Promise<Buffer> {
    return serially(() => storage.exportFile(name));
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

/** Milliseconds since `started` (performance.now()), to a tenth. */
function elapsedMs(started: number): number {
  return Math.round((performance.now() - started) * 10) / 10;
}

/** Genesis, listed first: the built-in chain, no agents. */
function genesisInfo(): SnapshotInfo {
  return {
    name: GENESIS_SNAPSHOT,
    block_number: GENESIS.block_number,
    created_at: new Date(GENESIS.block_timestamp * 1000).toISOString(),
    size_bytes: 0,
  };
}
