import type { Hash } from 'viem';
import type { StandbyStatus } from '../../api/schemas/index.ts';
import { StartupError } from '../errors.ts';
import { type AnvilProcess, adoptAnvil, type SurvivingAnvil, startAnvil } from './anvil.ts';
import { GENESIS } from './genesis.ts';
import { nodeFetch } from './http.ts';
import type { BlockHead } from './producer.ts';
import {
  type ChainCopy,
  checkpointCopy,
  lastLogged,
  latestHead,
  loadChain,
  mineLogged,
  type RestoreOptions,
  readHeaders,
  readPointer,
  STANDBY_LOAD_FILE,
} from './restore.ts';
import { createRpcClient, type RpcClient } from './rpc.ts';

/** Logged blocks replayed onto the standby in one round, whose hashes are then checked. */
const FOLLOW_BATCH = 100;
/** After a standby fails, the next one starts this long after, doubling up to RETRY_MAX_MS. */
const RETRY_MS = 1_000;
const RETRY_MAX_MS = 60_000;
/** A standby that has followed this long without failing starts the backoff afresh. */
const HEALTHY_AFTER_MS = 60_000;
/**
 * A start pauses the producer while anvil dumps the chain: starts are spaced by at least this
 * many times the last pause, as checkpoints are (writes wait for them at most 1/20 of the time).
 */
const START_SPACING = 20;
/**
 * One request to the standby may take this long before it counts as hung: a promotion runs
 * while writes wait, and must rather rebuild the chain than wait on a stalled standby.
 */
const REQUEST_TIMEOUT_MS = 5_000;
/**
 * A standby starts from the checkpoint and replays the log when the log holds at most this
 * many blocks (well under a second of replay, and no pause of the producer); past it, from a
 * copy of the running chain, which pauses the producer while anvil dumps it.
 */
const REPLAY_AT_MOST = 200;
/**
 * After a promotion the next standby starts this much later: the writes that waited for the
 * recovery go first, before a copy of the chain pauses the producer.
 */
const NEXT_AFTER_PROMOTION_MS = 1_000;

export interface StandbyOptions extends RestoreOptions {
  /** The state dir: where the standby anvil's pid file goes. */
  stateDir: string;
  log: { info(message: string): void; warn(message: string): void };
  /**
   * A copy of the chain at the log's head (anvil_dumpState of the primary, taken while no
   * block is made, after the blocks others mined are logged): where a standby starts when
   * the log since the checkpoint is long, or cannot give the chain (see start()).
   */
  copyChain(): Promise<ChainCopy>;
  /** The log's head block number. */
  logHead(): number;
  /**
   * Runs before a standby left running by a killed serve is dropped for holding blocks past
   * the log's last: throws (a StartupError) when they may be acknowledged writes sandbox.db
   * has lost, so that copy is kept.
   */
  checkUnlogged?(lastLogged: { number: number; hash: Hash }): void;
}

interface Follower {
  anvil: AnvilProcess;
  rpc: RpcClient;
  /** The last logged block it has mined again, checked by hash. */
  head: { number: number; hash: Hash };
  /** When it started following (performance.now()). */
  since: number;
}

/**
 * The warm standby: a second anvil, started from a copy of the chain at the log's head, that
 * mines every logged block again as soon as it is committed, and checks each one's hash. When
 * the primary anvil dies, or its chain is changed under the sandbox, the standby (at the log's
 * head, or a few blocks behind it) is promoted in its place: a recovery then costs those few
 * blocks, not a replay of every block since the checkpoint.
 *
 * Only logged blocks reach it, and only the sandbox talks to it (its port is nowhere
 * published), so its chain is the log's. A block that comes out with another hash (the
 * primary's state had been changed outside transactions, with anvil's cheat methods) fails it:
 * it is dropped, and the next copies the chain as it is now, change included. A standby that
 * fails is started again after a backoff. None of this is on the write path: the producer
 * never waits for the standby (a start pauses it while anvil dumps the chain, as a checkpoint
 * does).
 */
export function createStandby(options: StandbyOptions) {
  const { store, stateDir, log } = options;
  let follower: Follower | undefined;
  /** A start under way. */
  let starting = false;
  /**
   * The last standby's block came out other than the logged one (cheat methods changed the
   * primary's state): the checkpoint and log cannot give the chain, the next start copies it.
   */
  let mustCopy = false;
  /** A checkpoint asked for was taken: the standby is replaced (see refresh()). */
  let refreshing = false;
  /** Set while a promotion, or the shutdown, holds the standby: no round starts. */
  let held = false;
  let closed = false;
  let running: Promise<void> | undefined;
  /** The catch-up under way: a promotion waits for it (never for a start, see promote). */
  let catchingUp: Promise<void> | undefined;
  let wanted = false;
  let failures = 0;
  let retryAt = 0;
  let retryTimer: NodeJS.Timeout | undefined;
  let lastFailed: Follower | undefined;

  /** Asks for a round: start a standby if there is none, else mine what the log gained. */
  function follow(): void {
    wanted = true;
    if (running || held) return;
    running = (async () => {
      while (wanted && !held) {
        wanted = false;
        await round();
      }
    })().finally(() => {
      running = undefined;
      if (wanted && !held) follow();
    });
  }

  async function round(): Promise<void> {
    if (refreshing) {
      refreshing = false;
      if (follower) await drop(follower);
    }
    const current = follower;
    try {
      if (current) await catchUpOnce();
      else if (Date.now() >= retryAt) await start();
      else retryLater(retryAt - Date.now());
    } catch (error) {
      await failed(error as Error, follower ?? current);
    }
  }

  async function start(): Promise<void> {
    if (closed) return;
    starting = true;
    let anvil: AnvilProcess | undefined;
    const pointer = await readPointer(store);
    try {
      let copy: ChainCopy;
      if (!mustCopy && options.logHead() - pointer.block <= REPLAY_AT_MOST) {
        copy = await checkpointCopy(options, pointer);
      } else {
        const paused = performance.now();
        copy = await options.copyChain();
        // The next copy waits at least START_SPACING times the pause this one made.
        retryAt = Math.max(retryAt, Date.now() + START_SPACING * (performance.now() - paused));
      }
      if (closed) return;
      const { rpc, loaded } = await loadChain(
        options,
        copy,
        async (loadState) => {
          if (closed) throw new Error('serve is stopping');
          anvil = await startAnvil({ stateDir, role: 'standby', mining: 'manual', loadState });
          return createRpcClient(anvil.rpcUrl, nodeFetch, REQUEST_TIMEOUT_MS);
        },
        STANDBY_LOAD_FILE,
        'copy',
      );
      if (closed) throw new Error('serve is stopping');
      mustCopy = false;
      follower = { anvil: anvil as AnvilProcess, rpc, head: loaded, since: performance.now() };
      watch(follower.anvil);
    } catch (error) {
      await anvil?.stop().catch(() => undefined);
      // A checkpoint replaced the one it read meanwhile (and removed its file): no failure,
      // the next round starts from the new one.
      if ((await readPointer(store)).block !== pointer.block) {
        wanted = true;
        return;
      }
      throw error;
    } finally {
      starting = false;
    }
    await catchUpOnce();
  }

  function catchUpOnce(): Promise<void> {
    catchingUp ??= catchUp().finally(() => {
      catchingUp = undefined;
    });
    return catchingUp;
  }

  /**
   * Mines every block the log holds past the follower's head, a batch at a time. Never starts
   * a standby (a start waits for the producer, which a promotion holds).
   */
  async function catchUp(): Promise<void> {
    for (;;) {
      const current = follower;
      // A shutdown does not wait for a long catch-up.
      if (!current || closed) return;
      const blocks = await store.chainLog.next(current.head.number, FOLLOW_BATCH);
      const first = blocks[0];
      // A checkpoint keeps in the log what the standby has yet to mine (neededAfter), but
      // only so much: one that lagged further behind has lost its next block.
      const cut = !first && current.head.number < (await readPointer(store)).block;
      if (!first && !cut) {
        if (performance.now() - current.since >= HEALTHY_AFTER_MS) failures = 0;
        return;
      }
      if (
        cut ||
        first?.number !== current.head.number + 1 ||
        first.parentHash !== current.head.hash
      ) {
        // A checkpoint cut the log past this standby while it lagged far behind, or a rebuild
        // logged other blocks: the next round starts another.
        log.info(
          `the standby anvil at block ${current.head.number} no longer continues the log; another starts`,
        );
        await drop(current);
        wanted = true;
        return;
      }
      await mineLogged(current.rpc, blocks);
      const headers = await readHeaders(
        current.rpc,
        blocks.map((block) => block.number),
      );
      const differs = headers.find((header, i) => header.hash !== blocks[i]?.hash);
      if (differs) {
        mustCopy = true;
        throw new Error(
          `its block ${differs.number} came out other than the logged one ` +
            '(the chain was changed outside transactions: anvil cheat methods over the RPC URL?)',
        );
      }
      const last = headers.at(-1) as { number: number; hash: Hash };
      current.head = { number: last.number, hash: last.hash };
    }
  }

  /** The standby `which` failed (undefined: it failed to start): drop it, start another later. */
  async function failed(error: Error, which: Follower | undefined): Promise<void> {
    // Its exit and a call that found it gone are one failure.
    if (which && which === lastFailed) return;
    lastFailed = which;
    if (which) await drop(which);
    if (closed) return;
    failures++;
    const wait = Math.min(RETRY_MAX_MS, RETRY_MS * 2 ** (failures - 1));
    // Never sooner than the spacing of copies asks (start() set it).
    retryAt = Math.max(retryAt, Date.now() + wait);
    log.warn(`the standby anvil failed: ${error.message}; another starts in ${wait / 1000} s`);
    retryLater(retryAt - Date.now());
  }

  /** A round in `ms` (the one already set, if any, is replaced). */
  function retryLater(ms: number): void {
    clearTimeout(retryTimer);
    retryTimer = setTimeout(follow, ms);
    retryTimer.unref();
  }

  async function drop(which: Follower): Promise<void> {
    if (follower === which) follower = undefined;
    await which.anvil.stop().catch((error: unknown) => {
      log.warn(`stopping the standby anvil (pid ${which.anvil.pid}): ${(error as Error).message}`);
    });
  }

  /** A standby that exits on its own (killed, crashed) is a failure: another starts later. */
  function watch(anvil: AnvilProcess): void {
    void anvil.exited.then(() => {
      if (follower?.anvil !== anvil) return;
      void failed(new Error(`its process (pid ${anvil.pid}) exited`), follower);
    });
  }

  return {
    follow,

    /**
     * Takes over the standby a killed serve of this state dir left running, when its chain is
     * the log's (its head is a logged block, or the checkpoint's); otherwise stops it. Call at
     * start, once the chain is up; follow() then goes on from there.
     */
    async adopt(found: SurvivingAnvil): Promise<void> {
      const anvil = adoptAnvil(stateDir, found, 'standby');
      const rpc = createRpcClient(anvil.rpcUrl);
      try {
        const [chainId, head] = await Promise.all([rpc.call('eth_chainId'), latestHead(rpc)]);
        if (Number(chainId) !== GENESIS.chain_id) throw new Error('it is not the sandbox chain');
        const pointer = await readPointer(store);
        const last = await lastLogged(store);
        if (head.number > last.number) {
          // It only ever mines logged blocks: the log lost some (sandbox.db-wal damaged).
          options.checkUnlogged?.(last);
          throw new Error(`it holds blocks past the log's last, ${last.number}`);
        }
        const known =
          head.number === pointer.block
            ? pointer.hash
            : (await store.chainLog.find(head.number))?.hash;
        if (known === undefined && head.number < pointer.block) {
          throw new Error(
            `its head, block ${head.number}, is behind the checkpoint (${pointer.block})`,
          );
        }
        if (known !== head.hash) throw new Error(`its block ${head.number} is not the logged one`);
        await rpc.call('anvil_dropAllTransactions');
        follower = {
          anvil,
          rpc: createRpcClient(anvil.rpcUrl, nodeFetch, REQUEST_TIMEOUT_MS),
          head,
          since: performance.now(),
        };
        watch(anvil);
        log.info(`took over the standby anvil (pid ${anvil.pid}) at block ${head.number}`);
      } catch (error) {
        // Kept running when the start is refused: it may hold the only copy of lost writes.
        if (error instanceof StartupError) throw error;
        log.warn(
          `the standby anvil left running (pid ${anvil.pid}) is not used: ${(error as Error).message}`,
        );
        await anvil.stop();
      }
    },

    /**
     * The standby's anvil, its chain brought to the log's head `target` and checked, for the
     * caller to use as the primary; undefined when there is no standby that can be (none
     * yet, still starting, or it failed). Call while no block is being made (the caller holds
     * the producer), with the primary stopped. A catch-up under way is let finish first; a
     * start under way is not waited for: it waits for the producer, and goes on once the
     * caller has recovered the chain another way.
     */
    async promote(
      target: BlockHead,
    ): Promise<{ anvil: AnvilProcess; head: BlockHead } | undefined> {
      held = true;
      try {
        await catchingUp?.catch(() => undefined);
        const current = follower;
        try {
          await catchUpOnce();
        } catch (error) {
          await failed(error as Error, follower ?? current);
          return undefined;
        }
        const chosen = follower;
        if (!chosen) return undefined;
        // Its head, read from it: a standby killed with the primary may not be known dead yet.
        const head = await latestHead(chosen.rpc).catch(() => undefined);
        if (head?.number !== target.number || head.hash !== target.hash) {
          log.warn(
            head
              ? `the standby anvil is at block ${head.number}, not at the log's head ${target.number}; it is not used`
              : 'the standby anvil does not answer; it is not used',
          );
          await drop(chosen);
          return undefined;
        }
        follower = undefined;
        retryAt = Math.max(retryAt, Date.now() + NEXT_AFTER_PROMOTION_MS);
        retryLater(retryAt - Date.now());
        return { anvil: chosen.anvil, head };
      } finally {
        held = false;
      }
    },

    /**
     * The standby's head, when there is one following: a checkpoint keeps the log's blocks
     * after it (up to a bound), so that a standby a few blocks behind goes on.
     */
    neededAfter(): number | undefined {
      return follower?.head.number;
    },

    /**
     * After a checkpoint asked for (POST /sandbox/checkpoint), which keeps what cheat methods
     * changed since the last block: a standby that has mined only logged blocks lacks it, so
     * it is dropped and the next starts from that checkpoint (no pause of the producer).
     */
    refresh(): void {
      refreshing = true;
      follow();
    },

    /**
     * Stops the standby and holds it (a restore replaces the chain it follows): nothing starts
     * until resume().
     */
    async suspend(): Promise<void> {
      held = true;
      clearTimeout(retryTimer);
      await running;
      await catchingUp?.catch(() => undefined);
      if (follower) await drop(follower);
      mustCopy = false;
      refreshing = false;
    },

    /** After suspend(): a new standby starts from the chain's checkpoint and log. */
    resume(): void {
      held = false;
      failures = 0;
      retryAt = 0;
      follow();
    },

    status(): StandbyStatus {
      if (follower) return { status: 'following', block_number: follower.head.number };
      if (starting) return { status: 'starting', block_number: null };
      return { status: 'none', block_number: null };
    },

    async close(): Promise<void> {
      closed = true;
      held = true;
      clearTimeout(retryTimer);
      await running;
      if (follower) await drop(follower);
    },
  };
}
