import type { Address, Hash, Hex } from 'viem';
import type { SandboxClock } from '../clock.ts';
import { StartupError } from '../errors.ts';
import { crashAt } from '../faults.ts';
import type { Store, StoreTx } from '../store/index.ts';
import type { LoggedBlock } from '../store/types.ts';
import {
  type AnvilProcess,
  adoptAnvil,
  type SurvivingAnvil,
  startAnvil,
  survivingAnvils,
} from './anvil.ts';
import { CHECKPOINT_FORMAT, type Checkpoint } from './checkpoint.ts';
import type { CheckpointStore } from './checkpoint-store.ts';
import { SANDBOX_BASE_FEE } from './clients.ts';
import { type Deployment, findMisplacedContracts } from './deployment.ts';
import { ChainUnavailableError } from './errors.ts';
import { GENESIS } from './genesis.ts';
import { nodeFetch } from './http.ts';
import {
  type BlockHead,
  type BlockProducer,
  ChainDivergedError,
  createBlockProducer,
} from './producer.ts';
import {
  type ChainCopy,
  type CheckpointPointer,
  currentPointer,
  lastLogged,
  latestHead,
  META_DEPLOYMENT,
  readPointer,
  restore,
  writePointer,
} from './restore.ts';
import { createRpcClient, type RpcBlock, type RpcClient, toQuantity } from './rpc.ts';
import { type RpcGateway, startRpcGateway } from './rpc-gateway.ts';
import { createStandby } from './standby.ts';

/**
 * A checkpoint is taken once this many blocks are logged after the last one… A rebuild after
 * anvil dies replays them one by one, several ms each (anvil computes each block's state root),
 * so this bounds a rebuild to about a second.
 */
export const CHECKPOINT_EVERY_BLOCKS = 100;
/** …or when blocks have waited this long, so that a rebuild never replays for long… */
export const CHECKPOINT_AFTER_MS = 2_000;
/**
 * …but an automatic checkpoint follows the last one only after this many times the pause it
 * made (writes wait while anvil dumps the chain): a big chain is dumped less often, and writes
 * never wait for checkpoints more than 1/20 of the time.
 */
const CHECKPOINT_SPACING = 20;
/** A checkpoint the chain kept moving under (blocks mined over the RPC URL) is tried again. */
const CHECKPOINT_TRIES = 3;
/** How often blocks mined, and transactions sent, by others over the RPC URL are picked up. */
const POLL_MS = 250;

export interface ChainLogger {
  info(message: string): void;
  warn(message: string): void;
  error(message: string): void;
}

export interface LocalChainOptions<Observed = unknown> {
  /** This machine's files of the chain: anvil's pid files, and leftovers of a killed serve. */
  stateDir: string;
  /** Where the chain's checkpoints are kept: the state dir's chain/, or the database. */
  checkpoints: CheckpointStore;
  sandboxId: string;
  store: Store;
  clock: SandboxClock;
  log: ChainLogger;
  /** Turns a reverted transaction into its reason (needs the contracts' ABIs). */
  revertReason(rpc: RpcClient, hash: Hash): Promise<string>;
  /**
   * Reads what a copy of the chain's state must be compared with, at the block a checkpoint
   * dumps, while no block is being made: anvil answers a read at the head's hash from the
   * state of the block it is mining, so the same read made later could see a later state.
   */
  observeAtCheckpoint?(at: BlockHead): Promise<Observed>;
  /**
   * Runs after each checkpoint is on disk, with its block and what observeAtCheckpoint read
   * (undefined when that failed), before the checkpoint resolves: whoever keeps copies of the
   * chain's state may compare them with the state the checkpoint made permanent. A failure is
   * logged; the checkpoint stands.
   */
  afterCheckpoint?(block: number, observed: Observed | undefined): Promise<void>;
  /**
   * Checkpoints by block count and by time; when false (a test's or the bench's knob, see
   * docs/state-directory.md), only on request and at a graceful shutdown.
   */
  automaticCheckpoints?: boolean;
  /**
   * How long new blocks wait for an automatic checkpoint; CHECKPOINT_AFTER_MS unless a test
   * sets it longer, to see the block count's trigger alone.
   */
  checkpointAfterMs?: number;
  /**
   * Runs once a rebuilt chain is reachable again, before the rebuild counts as done (the
   * index rolls back to it): until then /health says degraded.
   */
  afterRebuild?(): Promise<void>;
  /**
   * Runs before the blocks an anvil left running holds past the log's last are dropped (see
   * takeOver): throws to refuse the start when they may be acknowledged writes that sandbox.db
   * has lost, so that the only copy of them is kept.
   */
  checkUnlogged?(lastLogged: { number: number; hash: Hash }): void;
}

/**
 * The sandbox's own chain: an anvil that mines only when the block producer says so, rebuilt
 * at start from the last checkpoint and the chain log, or taken over as it is when a killed
 * serve left it running. A warm standby (standby.ts) follows the log; when anvil dies or the
 * chain is changed under it, the standby takes its place, or, without one, the chain is
 * rebuilt. Others reach it through the RPC gateway; the sandbox's own calls go straight to
 * anvil. Both are shut while the chain is recovered. Checkpoints run in the background, off
 * the write path.
 */
export async function startLocalChain<Observed>(options: LocalChainOptions<Observed>) {
  const { store, stateDir, checkpoints, log } = options;
  // What a serve killed with kill -9 left running; every other anvil of this dir is stopped.
  const survivors = survivingAnvils(stateDir);
  // A state file a killed serve left while an anvil loaded it.
  await checkpoints.removeAbandonedStateFiles();
  const gateway: RpcGateway = await startRpcGateway();
  /** True while the chain is recovered: the sandbox's own calls fail as if anvil were down. */
  let rebuilding = false;
  let anvil: AnvilProcess | undefined;
  // A free port at first; a restarted anvil keeps it. The sandbox's own clients keep the
  // first anvil's URL (nodeUrl) whichever anvil holds the chain: ownFetch sends their calls
  // to the current one (a promoted standby listens on a port of its own).
  let port = 0;
  let nodeUrl = '';
  const ownFetch = ((input: string | URL, init?: RequestInit) => {
    if (rebuilding)
      return Promise.reject(new TypeError('fetch failed: the chain is being rebuilt'));
    // viem writes the URL with a trailing slash.
    const ours = input === nodeUrl || input === `${nodeUrl}/`;
    return nodeFetch(ours && anvil ? anvil.rpcUrl : input, init);
  }) as typeof fetch;
  /** Starts anvil from a state file; answers a client for the rebuild, which bypasses the gate. */
  const launch = async (loadState: string): Promise<RpcClient> => {
    anvil = await startAnvil({ stateDir, mining: 'manual', port, loadState });
    port = Number(new URL(anvil.rpcUrl).port);
    return createRpcClient(anvil.rpcUrl);
  };
  const standby = createStandby({
    ...options,
    log,
    copyChain: () => copyChain(),
    logHead: () => producer.head().number,
  });
  let closing = false;
  let recovering: Promise<void> | undefined;
  let checkpointing: Promise<number> | undefined;
  /** When the last checkpoint's dump ended, and how long writes waited for it. */
  let lastCheckpoint = { at: performance.now(), pauseMs: 0 };
  let deployment: Deployment;
  let head: BlockHead;

  try {
    ({ deployment, head } =
      (await takeOver(options, survivors.primary, (found) => {
        anvil = found;
        port = Number(new URL(found.rpcUrl).port);
      })) ?? (await restore(options, launch)));
    gateway.openTo(port);
    if (survivors.standby) await standby.adopt(survivors.standby);
  } catch (error) {
    await standby.close();
    await anvil?.stop();
    await gateway.stop();
    throw error;
  }
  nodeUrl = `http://127.0.0.1:${port}`;
  // The producer's, the checkpoints', the index's and (with ownFetch) the routes' calls.
  const chainRpc = createRpcClient(nodeUrl, ownFetch);

  const producer: BlockProducer = createBlockProducer({
    rpc: chainRpc,
    head,
    nowSeconds: () => options.clock.nowSeconds(),
    commit: async (blocks, records) => {
      // The clock catches up in the commit that logs the blocks, after the writes' records
      // (a clock advance's own offset comes first).
      const outcomes = await store.commitBlocks(blocks, [
        ...records,
        (tx) => catchUpClock(tx, options.clock, blocks, log),
      ]);
      if (records.length > 0) crashAt('crash-after-commit');
      return outcomes.slice(0, records.length);
    },
    sync: () => store.sync(),
    revertReason: (hash) => options.revertReason(chainRpc, hash),
    onDiverged: (error) => {
      void recover(`the chain no longer matches the log (${error.message})`);
    },
    baseFee: SANDBOX_BASE_FEE,
    log,
  });

  const watchAnvil = (process: AnvilProcess) => {
    process.exited.then(() => {
      if (!closing && process === anvil) void recover('anvil exited');
    });
  };
  watchAnvil(anvil as AnvilProcess);

  /**
   * Stops anvil and puts the standby in its place, at the log's head; without a standby that
   * can be, restarts anvil and rebuilds the chain from the checkpoint and the log. The gateway
   * and the sandbox's own calls are shut meanwhile: no one reads a chain that is only partly
   * rebuilt (a route answers 503 instead) or sends transactions into it. Writes that arrive
   * meanwhile wait for the producer's gate, and go into the recovered chain. Each attempt
   * holds the gate; between attempts writes run (and fail with 503 against the closed
   * gateway) rather than hang. Gives up only when serve shuts down.
   */
  function recover(why: string): Promise<void> {
    if (closing) return Promise.resolve();
    recovering ??= (async () => {
      for (let attempt = 1; !closing; attempt++) {
        try {
          const restored = await producer.exclusive(async () => {
            rebuilding = true;
            gateway.close();
            await anvil?.stop();
            try {
              const promoted = await standby.promote(producer.head());
              let rebuilt: { head: BlockHead };
              if (promoted) {
                anvil = promoted.anvil;
                anvil.recordAs('primary');
                port = Number(new URL(anvil.rpcUrl).port);
                log.warn(
                  `${why}: the standby anvil (pid ${anvil.pid}), at the log's head, holds the chain now`,
                );
                rebuilt = promoted;
              } else {
                log.warn(
                  `${why}: restarting anvil and rebuilding the chain from its checkpoint and log`,
                );
                rebuilt = await restore(options, launch);
              }
              gateway.openTo(port);
              rebuilding = false;
              return rebuilt;
            } finally {
              if (anvil) watchAnvil(anvil);
            }
          });
          producer.setHead(restored.head);
          await options.afterRebuild?.().catch((error: unknown) => {
            log.warn(`after the rebuild: ${(error as Error).message}`);
          });
          log.warn(`the chain is back at block ${restored.head.number}`);
          // A new standby, in the background (a second later after a promotion).
          standby.follow();
          return;
        } catch (error) {
          log.error(
            `recovering the chain failed (attempt ${attempt}): ${(error as Error).message}`,
          );
          await new Promise((resolve) => setTimeout(resolve, Math.min(5000, 250 * attempt)));
        }
      }
    })().finally(() => {
      recovering = undefined;
    });
    return recovering;
  }

  /**
   * Dumps the chain while no block is being made, keeps the dump durably (checkpoints.write),
   * then cuts the log back to it, and resolves with the block it holds. Blocks others mined
   * over the RPC URL are logged first: they are part of the chain. A chain that no longer
   * extends the log or lost the protocol's contracts is not checkpointed: the last good
   * checkpoint and the log are kept, the chain is rebuilt, and the promise rejects saying why.
   */
  function checkpoint(request: { evenWithoutNewBlocks?: boolean } = {}): Promise<number> {
    // One asked for (POST /sandbox/checkpoint) holds the chain as it was when asked: one being
    // taken already (an automatic one) may have dumped it before, so it is let finish first.
    if (request.evenWithoutNewBlocks && checkpointing) {
      return checkpointing.catch(() => undefined).then(() => checkpoint(request));
    }
    checkpointing ??= (async () => {
      const pointer = await readPointer(store);
      let taken: { at: BlockHead; state: Hex; observed: Observed | undefined } | undefined;
      for (let tries = 1; ; tries++) {
        const paused = performance.now();
        const outcome = await producer.exclusive(() =>
          dumpChain(pointer, request.evenWithoutNewBlocks ?? false),
        );
        lastCheckpoint = { at: performance.now(), pauseMs: performance.now() - paused };
        if (outcome !== 'moved') {
          taken = outcome;
          break;
        }
        if (tries === CHECKPOINT_TRIES) {
          throw new Error(
            'the chain kept changing while it was dumped (blocks mined over the RPC URL); the next checkpoint takes it',
          );
        }
      }
      if (!taken) return pointer.block;
      const at = taken.at;
      // The blocks the dump holds must be in the log on disk before the dump is: a start
      // adopts a checkpoint only when the log knows its block.
      await store.sync();
      const file: Checkpoint = {
        format: CHECKPOINT_FORMAT,
        sandbox_id: options.sandboxId,
        chain_id: GENESIS.chain_id,
        block_number: at.number,
        block_hash: at.hash,
        block_timestamp: at.timestamp,
        deployment,
        state: taken.state,
      };
      await checkpoints.write(file, () => crashAt('crash-before-checkpoint'));
      crashAt('crash-in-checkpoint');
      // The log keeps what the standby has yet to mine, a few blocks at most, so that it goes
      // on rather than start again from a copy; never more than CHECKPOINT_EVERY_BLOCKS.
      const needed = standby.neededAfter() ?? at.number;
      const through = Math.max(at.number - CHECKPOINT_EVERY_BLOCKS, Math.min(at.number, needed));
      await store.transaction(async (tx) => {
        await writePointer(tx, { block: at.number, hash: at.hash });
        await tx.chainLog.truncateThrough(through);
      });
      // The old checkpoint goes only once the database points past it, on disk.
      await store.sync();
      await checkpoints.prune(at.number);
      // One asked for keeps what cheat methods changed since the last block, which the
      // standby (it mines logged blocks only) lacks: it starts again from this checkpoint.
      if (request.evenWithoutNewBlocks) standby.refresh();
      await options.afterCheckpoint?.(at.number, taken.observed).catch((error: unknown) => {
        log.warn(`after the checkpoint at block ${at.number}: ${(error as Error).message}`);
      });
      return at.number;
    })().finally(() => {
      checkpointing = undefined;
    });
    return checkpointing;
  }

  /**
   * The chain's state at the logged head, or undefined when the checkpoint already holds that
   * block (unless `again`: changes made with cheat methods create no block), or 'moved' when
   * someone mined while anvil dumped it (the dump is then of a later block). Call inside
   * exclusive().
   */
  async function dumpChain(pointer: CheckpointPointer, again: boolean) {
    if (recovering) throw new Error('the chain is being rebuilt; try again shortly');
    let problem: string | undefined;
    try {
      await producer.logOthersBlocks();
    } catch (error) {
      if (!(error instanceof ChainDivergedError)) throw error;
      problem = error.message;
    }
    const at = producer.head();
    // The genesis is built in: a start never reads a checkpoint of it.
    const kept = !again || at.number === GENESIS.block_number;
    if (!problem && at.number === pointer.block && kept) return undefined;
    problem ??= await missingContracts(chainRpc, deployment);
    if (problem) {
      log.warn(`not checkpointing: ${problem}; keeping the last good state`);
      void recover(problem);
      throw new Error(`${problem}; the last good state is kept and the chain rebuilt`);
    }
    const state = await chainRpc.call<Hex>('anvil_dumpState');
    const after = await latestHead(chainRpc);
    if (after.number !== at.number || after.hash !== at.hash) return 'moved' as const;
    const observed = await options.observeAtCheckpoint?.(at).catch((error: unknown) => {
      log.warn(`reading the chain at block ${at.number}: ${(error as Error).message}`);
      return undefined;
    });
    return { at, state, observed };
  }

  /** A checkpoint nobody waits for: a failure is logged; the log still has every block. */
  const checkpointInBackground = () => {
    checkpoint().catch((error: unknown) => {
      log.warn(`checkpoint failed: ${(error as Error).message}`);
    });
  };

  const automatic = options.automaticCheckpoints ?? true;
  /** Whether an automatic checkpoint may run now, `sinceMs` at least after the last one. */
  const spaced = (sinceMs: number) =>
    automatic &&
    !recovering &&
    !closing &&
    performance.now() - lastCheckpoint.at >=
      Math.max(sinceMs, CHECKPOINT_SPACING * lastCheckpoint.pauseMs);
  /** Never rejects: a failure to read the pointer is logged (the next block tries again). */
  const checkpointIfDue = async (): Promise<void> => {
    if (!spaced(0)) return;
    try {
      const pointer = await readPointer(store);
      if (spaced(0) && producer.head().number - pointer.block >= CHECKPOINT_EVERY_BLOCKS) {
        checkpointInBackground();
      }
    } catch (error) {
      log.error(`reading the checkpoint failed: ${(error as Error).message}`);
    }
  };
  /** After blocks were logged: the standby mines them too, and a checkpoint may be due. */
  const afterCommit = () => {
    standby.follow();
    return checkpointIfDue();
  };
  const poller = setInterval(() => {
    if (recovering || closing) return;
    const before = producer.head();
    producer
      .poll()
      // Others' blocks were logged: as after a write. (A checkpoint may be due either way.)
      .then(() => (producer.head() === before ? checkpointIfDue() : afterCommit()))
      .catch((error: unknown) =>
        log.error(`polling the chain failed: ${(error as Error).message}`),
      );
  }, POLL_MS);
  poller.unref();
  const afterMs = options.checkpointAfterMs ?? CHECKPOINT_AFTER_MS;
  const timer = setInterval(() => {
    if (!spaced(afterMs)) return;
    readPointer(store).then(
      (pointer) => {
        if (spaced(afterMs) && producer.head().number > pointer.block) checkpointInBackground();
      },
      (error: unknown) => log.error(`reading the checkpoint failed: ${(error as Error).message}`),
    );
  }, afterMs / 4);
  timer.unref();
  /**
   * The chain at the logged head, for a standby to start from: dumped while no block is made,
   * after the blocks others mined over the RPC URL are logged (a dump holds no unlogged block).
   */
  function copyChain(): Promise<ChainCopy> {
    return copyChainWith(async () => undefined).then(({ copy }) => copy);
  }

  /**
   * copyChain, and `alongside` run at the same moment, while still no block is made (a
   * snapshot copies the databases there): both hold the chain at the copy's block.
   */
  function copyChainWith<T>(
    alongside: (at: BlockHead) => Promise<T>,
  ): Promise<{ copy: ChainCopy; value: T }> {
    return producer.exclusive(async () => {
      await producer.logOthersBlocks();
      const at = producer.head();
      // anvil dumps in its own process while `alongside` works in this one.
      const [state, value] = await Promise.all([
        chainRpc.call<Hex>('anvil_dumpState'),
        alongside(at),
      ]);
      const after = await latestHead(chainRpc);
      if (after.number !== at.number || after.hash !== at.hash) {
        throw new Error('the chain moved while it was copied (blocks mined over the RPC URL)');
      }
      const copy = {
        block_number: at.number,
        block_hash: at.hash,
        block_timestamp: at.timestamp,
        deployment,
        state,
      };
      return { copy, value };
    });
  }

  /**
   * Replaces the chain with the one the state dir names once `swap` has put it there (the
   * checkpoint pointer, the log and chain/): with no block being made, the standby and anvil
   * stopped, the gateway shut and the sandbox's own calls refused (as in a recovery, which
   * this waits for), `swap` runs; then anvil starts from the new checkpoint and log, and the
   * standby starts again. Resolves with the new head. When `swap` or the start fails, the
   * chain is recovered from whatever the state dir names, and the error is thrown.
   */
  async function replace(swap: () => Promise<void>): Promise<BlockHead> {
    if (closing) throw new ChainUnavailableError();
    await recovering;
    await checkpointing?.catch(() => undefined);
    let done!: () => void;
    recovering = new Promise<void>((resolve) => {
      done = resolve;
    });
    await standby.suspend();
    try {
      const head = await producer.exclusive(async () => {
        rebuilding = true;
        gateway.close();
        const stopping = anvil;
        anvil = undefined;
        await stopping?.stop();
        await swap();
        const rebuilt = await restore(options, launch);
        if (anvil) watchAnvil(anvil);
        gateway.openTo(port);
        rebuilding = false;
        return rebuilt.head;
      });
      producer.setHead(head);
      lastCheckpoint = { at: performance.now(), pauseMs: 0 };
      return head;
    } catch (error) {
      recovering = undefined;
      done();
      if (!closing) await recover(`replacing the chain failed (${(error as Error).message})`);
      throw error;
    } finally {
      if (recovering !== undefined) {
        recovering = undefined;
        done();
      }
      standby.resume();
    }
  }

  // The standby starts with the first block logged, or now if the log already holds some (a
  // sandbox that never writes needs none: it restarts from its checkpoint alone), or goes on
  // from where the one a killed serve left running is.
  if (survivors.standby || producer.head().number > (await readPointer(store)).block) {
    standby.follow();
  }

  return {
    /** The RPC URL others use (the gateway's). */
    rpcUrl: gateway.url,
    /** anvil's own URL, and the fetch the sandbox's own clients must use with it. */
    nodeUrl,
    fetch: ownFetch,
    rpc: chainRpc,
    deployment,
    producer,
    afterCommit,
    checkpoint,
    recovering: () => recovering !== undefined,
    copyChainWith,
    replace,
    /**
     * Puts the chain back together from the standby, or from the checkpoint the pointer names
     * and the log after it, as when anvil dies (writes wait meanwhile); resolves once it is back.
     */
    recover,
    standby,
    async close(options: { checkpoint: boolean }) {
      clearInterval(poller);
      clearInterval(timer);
      // No new recovery attempt; writes already queued finish first.
      closing = true;
      await recovering;
      await standby.close().catch((error: unknown) => {
        log.warn(`stopping the standby: ${(error as Error).message}`);
      });
      await producer.exclusive(async () => {});
      // A write that comes later is refused, rather than sent to an anvil about to stop.
      producer.stop(new ChainUnavailableError());
      await checkpointing?.catch(() => undefined);
      if (options.checkpoint && anvil?.running()) await checkpoint().catch(() => undefined);
      await anvil?.stop();
      await gateway.stop();
    },
  };
}

export type LocalChain = Awaited<ReturnType<typeof startLocalChain>>;

/**
 * Chain time never goes back, so a block carrying a time later than sandbox time (someone
 * mined ahead over the RPC URL: `evm_mine` with a timestamp) would hold chain time still
 * until the clock caught up, for days perhaps. Sandbox time moves up to it instead, as it
 * does at start. Runs inside the commit that logs `blocks`.
 */
async function catchUpClock(
  tx: StoreTx,
  clock: SandboxClock,
  blocks: LoggedBlock[],
  log: ChainLogger,
): Promise<void> {
  const last = blocks.at(-1);
  if (!last) return;
  const behind = last.timestamp - clock.nowSeconds();
  if (behind <= 0) return;
  await clock.raiseTo(tx, last.timestamp);
  log.warn(
    `block ${last.number} carries a time ${behind} s ahead of the sandbox clock (mined over the RPC URL?): the clock moves up to it`,
  );
}

/**
 * Takes over the anvil a killed serve of this state dir left running, when its chain is the
 * logged one: nothing is replayed. Blocks past the log's last (mined, never acknowledged) are
 * rolled back and transactions waiting in its pool are dropped, as a rebuild would. Resolves
 * undefined, having stopped that anvil, when it cannot be used (the rebuild then starts).
 */
async function takeOver(
  options: LocalChainOptions,
  found: SurvivingAnvil | undefined,
  adopted: (anvil: AnvilProcess) => void,
): Promise<{ deployment: Deployment; head: BlockHead } | undefined> {
  const { store, stateDir, log } = options;
  const known = await store.meta.get(META_DEPLOYMENT);
  if (!found) return undefined;
  const anvil = adoptAnvil(stateDir, found, 'primary');
  const rpc = createRpcClient(anvil.rpcUrl);
  try {
    await currentPointer(options);
    const last = await lastLogged(store);
    if (known === undefined) throw new Error('the database does not name its contracts');
    const deployment = JSON.parse(known) as Deployment;
    const [chainId, latest, logged] = await rpc.batch([
      { method: 'eth_chainId' },
      { method: 'eth_blockNumber' },
      { method: 'eth_getBlockByNumber', params: [toQuantity(last.number), false] },
    ]);
    if (!chainId?.ok || Number(chainId.value) !== GENESIS.chain_id) {
      throw new Error('it is not the sandbox chain');
    }
    const block = logged?.ok ? (logged.value as RpcBlock | null) : null;
    if (block?.hash !== last.hash || !latest?.ok) {
      throw new Error(`its block ${last.number} is not the logged one`);
    }
    const ahead = Number(latest.value) - last.number;
    if (ahead > 0) options.checkUnlogged?.(last);
    await rpc.call('anvil_dropAllTransactions');
    if (ahead > 0) {
      await rpc.call('anvil_rollback', [ahead]);
      log.warn(`dropped ${ahead} block(s) anvil had mined after the last logged one`);
    }
    const head = await latestHead(rpc);
    if (head.number !== last.number || head.hash !== last.hash) {
      throw new Error(`it could not be brought back to block ${last.number}`);
    }
    if ((await findMisplacedContracts(rpc, deployment)).length > 0) {
      throw new Error("the protocol's contracts are not all in it");
    }
    adopted(anvil);
    log.info(`took over the running anvil (pid ${anvil.pid}) at block ${head.number}`);
    return { deployment, head };
  } catch (error) {
    // A refusal leaves that anvil running: it may hold the only copy of writes sandbox.db lost.
    if (error instanceof StartupError) throw error;
    log.warn(
      `the anvil left running (pid ${anvil.pid}) is not used: ${(error as Error).message}; rebuilding the chain`,
    );
    await anvil.stop();
    return undefined;
  }
}

/** Why the chain must not be checkpointed: the protocol's contracts are gone from it. */
async function missingContracts(
  rpc: RpcClient,
  deployment: Deployment,
): Promise<string | undefined> {
  const contracts: Address[] = [
    deployment.usdc,
    deployment.protocol_token,
    deployment.strategy_registry,
    deployment.governor,
    deployment.agent_pass,
    deployment.agent_onboarding,
    ...Object.values(deployment.vaults),
  ];
  const codes = await rpc.batch(
    contracts.map((address) => ({ method: 'eth_getCode', params: [address, 'latest'] })),
  );
  const missing = contracts.filter((_, i) => {
    const code = codes[i];
    return !code?.ok || code.value === '0x';
  });
  return missing.length > 0
    ? `the protocol's contracts are gone from the chain (${missing.join(', ')})`
    : undefined;
}
