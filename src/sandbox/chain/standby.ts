import type { Hash } from 'viem';
import type { StandbyStatus } from '../../api/schemas/index.ts';
import { StartupError } from '../errors.ts';
import { type AnvilProcess, adoptAnvil, type SurvivingAnvil, startAnvil } from './anvil.ts';
import { GENESIS } from './genesis.ts';
import type { BlockHead } from './producer.ts';
import {
  latestHead,
  loadCheckpoint,
  mineLogged,
  type RestoreOptions,
  readHeaders,
  readPointer,
} from './restore.ts';
import { createRpcClient, type RpcClient } from './rpc.ts';

/** Logged blocks replayed onto the standby in one round, whose hashes are then checked. */
const FOLLOW_BATCH = 100;
/** After a standby fails, the next one starts this long after, doubling up to RETRY_MAX_MS. */
const RETRY_MS = 1_000;
const RETRY_MAX_MS = 60_000;
/** Where the checkpoint's state is written for the standby's anvil --load-state. */
const LOAD_FILE = 'anvil-standby-load-state.json';

export interface StandbyOptions extends RestoreOptions {
  log: { info(message: string): void; warn(message: string): void };
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
}

/**
 * The warm standby: a second anvil, started from the last checkpoint, that mines every logged
 * block again as soon as it is committed, and checks each one's hash. When the primary anvil
 * dies, or its chain is changed under the sandbox, the standby (at the log's head, or a few
 * blocks behind it) is promoted in its place: a recovery then costs those few blocks, not a
 * replay of every block since the checkpoint.
 *
 * Only logged blocks reach it, and only the sandbox talks to it (its port is nowhere
 * published), so its chain is the log's. A block that comes out with another hash (the
 * primary's state had been changed outside transactions, with anvil's cheat methods) makes it
 * stale: it is dropped, and a new one starts from the next checkpoint, which holds that change.
 * A standby that fails is started again after a backoff. None of this is on the write path:
 * the producer never waits for the standby.
 */
export function createStandby(options: StandbyOptions) {
  const { store, stateDir, log } = options;
  let follower: Follower | undefined;
  /** A start under way. */
  let starting = false;
  /** Its chain differed from the log: waits for the next checkpoint. */
  let stale = false;
  /** Set while a promotion, or the shutdown, holds the standby: no round starts. */
  let held = false;
  let closed = false;
  let running: Promise<void> | undefined;
  let wanted = false;
  let failures = 0;
  let retryAt = 0;
  let retryTimer: NodeJS.Timeout | undefined;

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
    try {
      if (follower) await catchUp();
      else if (!stale && Date.now() >= retryAt) await start();
    } catch (error) {
      await failed(error as Error);
    }
  }

  async function start(): Promise<void> {
    starting = true;
    let anvil: AnvilProcess | undefined;
    try {
      const pointer = readPointer(store);
      const { rpc, loaded } = await loadCheckpoint(
        options,
        pointer,
        async (loadState) => {
          anvil = await startAnvil({ stateDir, role: 'standby', mining: 'manual', loadState });
          return createRpcClient(anvil.rpcUrl);
        },
        LOAD_FILE,
      );
      if (closed) throw new Error('serve is stopping');
      follower = { anvil: anvil as AnvilProcess, rpc, head: loaded };
      watch(follower.anvil);
    } catch (error) {
      await anvil?.stop();
      throw error;
    } finally {
      starting = false;
    }
    await catchUp();
  }

  /** Mines every block the log holds past the follower's head, a batch at a time. */
  async function catchUp(): Promise<void> {
    for (;;) {
      const current = follower;
      // A shutdown does not wait for a long catch-up.
      if (!current || closed) return;
      const blocks = store.chainLog.next(current.head.number, FOLLOW_BATCH);
      const first = blocks[0];
      if (!first) {
        failures = 0;
        return;
      }
      if (first.number !== current.head.number + 1 || first.parentHash !== current.head.hash) {
        // A checkpoint cut the log past this standby while it lagged behind, or a rebuild
        // logged other blocks: it starts again, from the checkpoint.
        await drop(current);
        await start();
        return;
      }
      await mineLogged(current.rpc, blocks);
      const headers = await readHeaders(
        current.rpc,
        blocks.map((block) => block.number),
      );
      const differs = headers.find((header, i) => header.hash !== blocks[i]?.hash);
      if (differs) {
        log.warn(
          `the standby anvil's block ${differs.number} came out other than the logged one ` +
            '(the chain was changed outside transactions: anvil cheat methods over the RPC URL?); ' +
            'a new standby starts from the next checkpoint',
        );
        stale = true;
        await drop(current);
        return;
      }
      const last = headers.at(-1) as { number: number; hash: Hash };
      current.head = { number: last.number, hash: last.hash };
    }
  }

  async function failed(error: Error): Promise<void> {
    if (follower) await drop(follower);
    if (closed) return;
    failures++;
    const wait = Math.min(RETRY_MAX_MS, RETRY_MS * 2 ** (failures - 1));
    retryAt = Date.now() + wait;
    log.warn(`the standby anvil failed: ${error.message}; another starts in ${wait / 1000} s`);
    clearTimeout(retryTimer);
    retryTimer = setTimeout(follow, wait);
    retryTimer.unref();
  }

  async function drop(which: Follower): Promise<void> {
    if (follower === which) follower = undefined;
    await which.anvil.stop();
  }

  /** A standby that exits on its own (killed, crashed) is a failure: another starts later. */
  function watch(anvil: AnvilProcess): void {
    void anvil.exited.then(() => {
      if (follower?.anvil !== anvil) return;
      void failed(new Error(`its process (pid ${anvil.pid}) exited`));
    });
  }

  return {
    follow,

    /** After each checkpoint: a stale standby may start again, from it. */
    checkpointed(): void {
      if (!stale) return;
      stale = false;
      follow();
    },

    /**
     * Takes over the standby a killed serve of this state dir left running, when its chain is
     * the log's (its head is a logged block, or the checkpoint's); otherwise stops it. Call at
     * start, once the chain is up.
     */
    async adopt(found: SurvivingAnvil): Promise<void> {
      const anvil = adoptAnvil(stateDir, found, 'standby');
      const rpc = createRpcClient(anvil.rpcUrl);
      try {
        const [chainId, head] = await Promise.all([rpc.call('eth_chainId'), latestHead(rpc)]);
        if (Number(chainId) !== GENESIS.chain_id) throw new Error('it is not the sandbox chain');
        const pointer = readPointer(store);
        let last = { number: pointer.block, hash: pointer.hash };
        for (const block of store.chainLog.after(pointer.block)) last = block;
        if (head.number > last.number) {
          // It only ever mines logged blocks: the log lost some (sandbox.db-wal damaged).
          options.checkUnlogged?.(last);
          throw new Error(`it holds blocks past the log's last, ${last.number}`);
        }
        const known =
          head.number === pointer.block ? pointer.hash : store.chainLog.find(head.number)?.hash;
        if (known !== head.hash) throw new Error(`its block ${head.number} is not the logged one`);
        await rpc.call('anvil_dropAllTransactions');
        follower = { anvil, rpc, head };
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
      follow();
    },

    /**
     * The standby's anvil, its chain brought to the log's head `target` and checked, for the
     * caller to use as the primary; undefined when there is no standby that can be (none
     * yet, stale, or it failed). Call while no block is being made, with the primary stopped.
     * A start or a round under way is let finish first.
     */
    async promote(
      target: BlockHead,
    ): Promise<{ anvil: AnvilProcess; head: BlockHead } | undefined> {
      held = true;
      try {
        await running;
        try {
          await catchUp();
        } catch (error) {
          await failed(error as Error);
          return undefined;
        }
        const chosen = follower;
        if (!chosen?.anvil.running()) return undefined;
        if (chosen.head.number !== target.number || chosen.head.hash !== target.hash) {
          log.warn(
            `the standby anvil is at block ${chosen.head.number}, not at the log's head ${target.number}; it is not used`,
          );
          await drop(chosen);
          return undefined;
        }
        follower = undefined;
        return { anvil: chosen.anvil, head: await latestHead(chosen.rpc) };
      } finally {
        held = false;
      }
    },

    status(): StandbyStatus {
      if (follower) return { status: 'following', block_number: follower.head.number };
      if (starting) return { status: 'starting', block_number: null };
      return { status: stale ? 'stale' : 'none', block_number: null };
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

export type Standby = ReturnType<typeof createStandby>;
