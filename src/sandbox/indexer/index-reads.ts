import type { SandboxChain } from '../chain/index.ts';
import type { Store } from '../store/index.ts';
import type { Checkpoint, IndexCommit, Indexer } from './indexer.ts';
import { createDataQueries, type DataQueries } from './queries.ts';
import { hasIndexedActivity, indexTime } from './reads.ts';
import type { IndexView } from './view.ts';

/**
 * The index as its readers (routes, GraphQL, the wallet allocator) see it: the data API's
 * answers and what the index says of itself, never index.db. Built by runtime.ts over the
 * index open now, which it may replace (a rebuild, a restore): every call reads the current
 * one, and commit listeners are carried over to it (attach).
 */
export interface IndexReads {
  /** The index's committed rows and what it says of itself, for readers of their own (the fulfiller). */
  view: IndexView;
  /** The data API's answers, shared by REST and GraphQL. */
  queries: DataQueries;
  /** Why the index cannot answer (it failed and is being rebuilt), or undefined when it can. */
  failure(): string | undefined;
  /** The last indexed block; undefined while the index has failed. */
  checkpoint(): Checkpoint | undefined;
  /** The data API's "now": the last indexed block's timestamp (sandbox time). */
  now(): number;
  /** A value that changes whenever the index commits anything. */
  version(): number;
  /** The writes' indexing waits: how many so far, and the median and p99 of the last ones. */
  waitStats(): ReturnType<Indexer['waitStats']>;
  /**
   * Calls `listener` after each commit with what it changed; answers the unsubscribe. A
   * listener runs synchronously inside the indexer's step: it must only schedule work.
   */
  onCommit(listener: (changes: IndexCommit) => void): () => void;
  /**
   * Whether the index holds any vault transaction or position of `address`. Rejects with
   * IndexUnavailableError while the index has failed (it cannot say).
   */
  hasActivity(address: string): Promise<boolean>;
}

/**
 * The readers' view of `current()`. `attach` forwards an index's commits to the listeners
 * (call it for each index opened; it answers the detach).
 */
export function createIndexReads(deps: {
  current: () => Indexer;
  chain: SandboxChain;
  store: Store;
}): IndexReads & { attach(index: Indexer): () => void } {
  const { current } = deps;
  const listeners = new Set<(changes: IndexCommit) => void>();
  // The index open now, whichever that is, as its readers see it.
  const view: IndexView = {
    read: (work) => current().query(work),
    version: () => current().version(),
    checkpoint: () => current().checkpoint(),
    failure: () => current().failure(),
  };
  return {
    view,
    queries: createDataQueries({ chain: deps.chain, store: deps.store, index: view }),
    failure: view.failure,
    checkpoint: view.checkpoint,
    now: () => indexTime(view),
    version: view.version,
    waitStats: () => current().waitStats(),
    onCommit(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    hasActivity: (address) => view.read((sql) => hasIndexedActivity(sql, address)),
    attach(index) {
      return index.onCommit((changes) => {
        // Each listener is told even when another fails; the index logs the failure.
        let failed: unknown;
        for (const listener of listeners) {
          try {
            listener(changes);
          } catch (error) {
            failed ??= error;
          }
        }
        if (failed !== undefined) throw failed;
      });
    },
  };
}
