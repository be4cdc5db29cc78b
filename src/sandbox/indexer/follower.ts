import type { Hash } from 'viem';
import type { ChainSource } from './source.ts';

/**
 * The index's realtime follower: how far to index (the head, less the finality depth, under
 * the ceiling), where the chain and the index part (the common ancestor, looked for no deeper
 * than the finality depth), and the background poll that follows the head.
 */

/** How often the chain's head is looked at, for activity that did not come through us. */
export const INDEX_POLL_MS = 200;
/** The longest pause between two tries of a poll that keeps failing. */
const INDEX_RETRY_MAX_MS = 2000;
/** A range that reads inconsistently (the chain moved while it was read) is read again… */
const REREADS = 3;
/** …after this pause, and then the sync fails and the poll tries again later. */
const REREAD_PAUSE_MS = 50;

/** What one step of indexing came to: at the goal, more to go, or the range must be read again. */
export type StepOutcome = 'done' | 'more' | 'reread';

export function createFollower(options: {
  source: ChainSource;
  /** The hashes of the indexed blocks from `from` to `to`, by number. */
  indexedHashes(from: number, to: number): Promise<Map<number, Hash>>;
  /** The last indexed block. */
  checkpoint: () => { number: number; hash: Hash } | undefined;
  /** Blocks this deep are final; 0 on a dev chain, where any block may be replaced. */
  finality: number;
  /** The highest block that may be indexed (see IndexerOptions.ceiling). */
  ceiling?: () => number;
  /** True once the index is closed. */
  closed: () => boolean;
  log: { warn(message: string): void };
  /** Cuts the index back to `ancestor` and derives its tables again. */
  rollBack(ancestor: number): Promise<void>;
}) {
  const { source, finality } = options;

  /**
   * The highest indexed block at or below `top` that is still on the chain (the common
   * ancestor). With a finality depth, only the blocks above it are looked at: a chain that no
   * longer holds the indexed block that deep (at.number − finality) reorganised deeper than
   * the depth allows, which is reported (DeepReorgError), not walked back to wherever it
   * meets the index. On a dev chain (finality 0) any block may be replaced (evm_revert), and the
   * walk is bounded by the blocks the index holds.
   */
  async function commonAncestor(top: number): Promise<number> {
    const at = options.checkpoint();
    const floor = finality > 0 && at ? Math.max(0, at.number - finality) : 0;
    for (let upper = top; upper >= floor; upper -= 32) {
      const bottom = Math.max(floor, upper - 31);
      const chain = await source.headers(bottom, upper);
      const indexed = await options.indexedHashes(bottom, upper);
      for (let n = upper; n >= bottom; n--) {
        const ours = indexed.get(n);
        if (!ours) return n;
        if (ours === chain[n - bottom]?.hash) return n;
      }
    }
    if (finality > 0 && at) throw new DeepReorgError(at.number, floor, finality);
    return -1;
  }

  /**
   * Goes back to the chain when it no longer holds the last indexed block: it went back
   * below it, or holds another block at its height (a rebuilt chain, anvil_reorg). A chain
   * that moved on is checked as it is read (a step).
   */
  async function followBack(head: { number: number; hash: Hash }): Promise<void> {
    const at = options.checkpoint();
    if (!at || head.number > at.number || (head.number === at.number && head.hash === at.hash)) {
      return;
    }
    const ancestor = await commonAncestor(head.number);
    options.log.warn(
      `the chain no longer holds indexed block ${at.number}: the index goes back to block ${ancestor} and follows the chain`,
    );
    await options.rollBack(ancestor);
  }

  /**
   * Back to the chain after a reorg, then forward to `target` (default: the chain's head,
   * less the finality depth), one committed `step` at a time; never a busy loop.
   */
  async function indexUpTo(
    target: number | undefined,
    step: (goal: number) => Promise<StepOutcome>,
  ): Promise<void> {
    let goal = target;
    if (goal === undefined) {
      const head = await source.latestHead();
      await followBack(head);
      goal = head.number - finality;
    }
    if (options.ceiling) goal = Math.min(goal, options.ceiling());
    for (let rereads = 0; !options.closed(); ) {
      const outcome = await step(goal);
      if (outcome === 'done') return;
      if (outcome === 'more') {
        rereads = 0;
        continue;
      }
      if (++rereads > REREADS) {
        throw new Error(
          `the chain's blocks after the index's checkpoint do not link up (read ${REREADS + 1} times)`,
        );
      }
      await new Promise((resolve) => setTimeout(resolve, REREAD_PAUSE_MS));
    }
  }

  return { commonAncestor, indexUpTo };
}
export type Follower = ReturnType<typeof createFollower>;

/**
 * Runs `work` every INDEX_POLL_MS in the background (not while `paused`), backing off after
 * failures, so that one that lasts is not retried (and logged) five times a second for ever.
 * `describe` names the work before it runs, for the failure's line. Answers the stop.
 */
export function poll(options: {
  work: () => Promise<void>;
  describe: () => string;
  paused?: () => boolean;
  log: { warn(message: string): void };
}): () => void {
  let failures = 0;
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;
  const tick = () => {
    // A step that was running at the stop does not start the poll again.
    if (stopped) return;
    const delay = Math.min(INDEX_RETRY_MAX_MS, INDEX_POLL_MS * 2 ** failures);
    timer = setTimeout(() => {
      if (options.paused?.()) {
        tick();
        return;
      }
      // Named before the work: a sync that fails the index was indexing, not rebuilding.
      const work = options.describe();
      options.work().then(
        () => {
          failures = 0;
          tick();
        },
        (error: unknown) => {
          failures = Math.min(failures + 1, 16);
          const next = Math.min(INDEX_RETRY_MAX_MS, INDEX_POLL_MS * 2 ** failures);
          options.log.warn(
            `${work} failed: ${(error as Error).message}; trying again in ${next / 1000} s`,
          );
          tick();
        },
      );
    }, delay);
    timer.unref();
  };
  tick();
  return () => {
    stopped = true;
    clearTimeout(timer);
  };
}

/**
 * The chain no longer holds a block the index took as final: it reorganised deeper than the
 * finality depth (a node resynced on another fork, a testnet reset, another chain behind the
 * same URL). index.db is rebuilt from the chain rather than walked back block by block.
 */
export class DeepReorgError extends Error {
  constructor(indexed: number, floor: number, depth: number) {
    super(
      `the chain reorganised deeper than the finality depth (${depth} blocks): it no longer holds indexed block ${floor}, ${indexed - floor} below the index's block ${indexed}`,
    );
    this.name = 'DeepReorgError';
  }
}
