import type { Checkpoint } from '../chain/checkpoint.ts';
import type { BlockHead } from '../chain/producer.ts';
import type { IdempotencyRow } from '../store/idempotency.ts';
import type { SnapshotMeta } from './files.ts';

/**
 * Where snapshots are kept, and how a restore puts one in place: the state dir's files
 * (directory.ts, `--state`) or schemas of the database (database.ts, `--database`). The
 * sequence around them is the same on both (index.ts): a snapshot copies the sandbox's rows and
 * the index while no block is made, then keeps the chain's dump beside them; a restore stops
 * the chain, puts the snapshot in place, and starts the chain from it.
 */
export interface SnapshotStorage {
  /** The snapshots kept (genesis, which is built in, is not among them), oldest first. */
  list(): Promise<Array<SnapshotMeta & { size_bytes: number }>>;
  /** Snapshot `name`'s description, or undefined when there is none of that name. */
  read(name: string): Promise<SnapshotMeta | undefined>;
  /**
   * Starts writing snapshot `name` (checked by the caller: a new name within the bound, or
   * one to replace). Throws an HttpError (409) when the storage itself refuses the name.
   */
  begin(name: string): Promise<SnapshotWriter>;
  /**
   * The snapshot a restore stopped half way through putting in place, which a restart
   * finishes; undefined when none did (always, where a restore is one transaction).
   */
  unfinished(): string | undefined;
  /**
   * Before a restore changes anything: refuses (an HttpError 409, naming why) a snapshot that
   * cannot be put in place (another schema's rows), and stages what can be staged.
   */
  prepareRestore(name: string): Promise<void>;
  /**
   * Puts snapshot `name` (or genesis) in place of the state: the rows but the identity, the
   * admin token, the idempotency keys that outlive a restore and the rate counts; the chain's
   * checkpoint and its pointer; the index. Runs while the chain is stopped (its `replace`).
   * `keys` (the restore's own, when it is keyed) go in with the rows, in their transaction:
   * a restore whose rows are in place has its key stored, whatever happens next.
   */
  putInPlace(name: string, keys: IdempotencyRow[]): Promise<void>;
  /** Removes snapshot `name`; false when there is none. */
  remove(name: string): Promise<boolean>;
  /** Snapshot `name` as an export file's bytes (export-file.ts's format). */
  exportFile(name: string): Promise<Buffer>;
}

/** One snapshot being written: begun, its state copied, then committed (or abandoned). */
export interface SnapshotWriter {
  /**
   * Copies the sandbox's rows, and the index's when `indexUpToDate` (it is at `at`), in the
   * pause in which the chain is dumped: no block comes between them. Resolves with whether the
   * index was copied (a snapshot without one indexes the chain again when restored).
   */
  copyState(at: BlockHead, indexUpToDate: boolean): Promise<boolean>;
  /**
   * Keeps the snapshot, whole: `chain` (the dump at the copy's block) beside the rows, the
   * copy made a start at that block (its pointer there, its chain log empty, no admin token),
   * in place of the snapshot of that name if there is one. Resolves with its size in bytes.
   */
  commit(chain: Checkpoint, meta: SnapshotMeta): Promise<number>;
  /** Drops whatever was written and not committed (always called, last). */
  abandon(): Promise<void>;
}
