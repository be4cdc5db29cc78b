import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import type { Address, Hash, Hex } from 'viem';
import type { SandboxClock } from '../clock.ts';
import { StartupError } from '../errors.ts';
import { crashAt } from '../faults.ts';
import type { Store } from '../store/index.ts';
import { type AnvilProcess, adoptAnvil, startAnvil, survivingAnvil } from './anvil.ts';
import {
  CHECKPOINT_FORMAT,
  type Checkpoint,
  checkpointPath,
  listCheckpoints,
  readCheckpoint,
  removeCheckpointsExcept,
  writeCheckpoint,
} from './checkpoint.ts';
import { SANDBOX_BASE_FEE } from './clients.ts';
import { type Deployment, describeMisplaced, findMisplacedContracts } from './deployment.ts';
import { ChainUnavailableError } from './errors.ts';
import { GENESIS } from './genesis.ts';
import { nodeFetch } from './http.ts';
import {
  type BlockHead,
  type BlockProducer,
  ChainDivergedError,
  createBlockProducer,
  type LoggedBlock,
} from './producer.ts';
import { createRpcClient, type RpcBlock, type RpcClient, toQuantity } from './rpc.ts';
import { type RpcGateway, startRpcGateway } from './rpc-gateway.ts';

/**
 * A checkpoint is taken once this many blocks are logged after the last one… A rebuild after
 * anvil dies replays them one by one, several ms each (anvil computes each block's state root),
 * so this bounds a rebuild to about a second.
 */
export const CHECKPOINT_EVERY_BLOCKS = 100;
/** …or when blocks have waited this long, so that a rebuild never replays for long… */
const CHECKPOINT_AFTER_MS = 2_000;
/**
 * …but an automatic checkpoint follows the last one only after this many times the pause it
 * made (writes wait while anvil dumps the chain): a big chain is dumped less often, and writes
 * never wait for checkpoints more than 1/20 of the time.
 */
const CHECKPOINT_SPACING = 20;
/** A checkpoint the chain kept moving under (blocks mined over the RPC URL) is tried again. */
const CHECKPOINT_TRIES = 3;
/** Replayed blocks whose hashes are read back in one request. */
const HEADERS_PER_READ = 500;
/** How often blocks mined, and transactions sent, by others over the RPC URL are picked up. */
const POLL_MS = 250;
const META_CHECKPOINT = 'chain_checkpoint';
/** The contracts' addresses in the chain last restored: a taken-over anvil is checked against them. */
const META_DEPLOYMENT = 'chain_deployment';
/** The checkpoint's state, written for anvil --load-state while anvil starts. */
const LOAD_STATE_FILE = 'anvil-load-state.json';

export interface ChainLogger {
  info(message: string): void;
  warn(message: string): void;
  error(message: string): void;
}

export interface LocalChainOptions<Observed = unknown> {
  stateDir: string;
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

/** Where the chain was last checkpointed: the genesis, or a file in chain/. */
interface CheckpointPointer {
  block: number;
  hash: Hash;
}

/**
 * The sandbox's own chain: an anvil that mines only when the block producer says so, rebuilt
 * at start (and whenever anvil dies or the chain is changed under it) from the last
 * checkpoint and the chain log, or taken over as it is when a killed serve left it running.
 * Others reach it through the RPC gateway; the sandbox's own calls go straight to anvil. Both
 * are shut while the chain is rebuilt. Checkpoints run in the background, off the write path.
 */
export async function startLocalChain<Observed>(options: LocalChainOptions<Observed>) {
  const { store, stateDir, log } = options;
  const gateway: RpcGateway = await startRpcGateway();
  /** True while the chain is rebuilt: the sandbox's own calls fail as if anvil were down. */
  let rebuilding = false;
  const ownFetch = ((input: string | URL, init?: RequestInit) =>
    rebuilding
      ? Promise.reject(new TypeError('fetch failed: the chain is being rebuilt'))
      : nodeFetch(input, init)) as typeof fetch;
  let anvil: AnvilProcess | undefined;
  // A free port at first; a restarted anvil keeps it, so the sandbox's own URL never changes.
  let port = 0;
  /** Starts anvil from a state file; answers a client for the rebuild, which bypasses the gate. */
  const launch = async (loadState: string): Promise<RpcClient> => {
    anvil = await startAnvil({ stateDir, mining: 'manual', port, loadState });
    port = Number(new URL(anvil.rpcUrl).port);
    return createRpcClient(anvil.rpcUrl);
  };
  let closing = false;
  let recovering: Promise<void> | undefined;
  let checkpointing: Promise<number> | undefined;
  /** When the last checkpoint's dump ended, and how long writes waited for it. */
  let lastCheckpoint = { at: performance.now(), pauseMs: 0 };
  let deployment: Deployment;
  let head: BlockHead;

  try {
    ({ deployment, head } =
      (await takeOver(options, (found) => {
        anvil = found;
        port = Number(new URL(found.rpcUrl).port);
      })) ?? (await restore(options, launch)));
    gateway.openTo(port);
  } catch (error) {
    await anvil?.stop();
    await gateway.stop();
    throw error;
  }
  const nodeUrl = `http://127.0.0.1:${port}`;
  // The producer's, the checkpoints', the index's and (with ownFetch) the routes' calls.
  const chainRpc = createRpcClient(nodeUrl, ownFetch);

  const producer: BlockProducer = createBlockProducer({
    rpc: chainRpc,
    head,
    nowSeconds: () => options.clock.nowSeconds(),
    commit: (blocks, records) => {
      // The clock catches up in the commit that logs the blocks, after the writes' records
      // (a clock advance's own offset comes first).
      const outcomes = store.commitBlocks(blocks, [
        ...records,
        () => catchUpClock(options.clock, blocks, log),
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
   * Restarts anvil and rebuilds the chain from the checkpoint and the log, with the gateway
   * and the sandbox's own calls shut: no one reads a chain that is only partly rebuilt (a
   * route answers 503 instead) or sends transactions into it. Writes that arrive
   * meanwhile wait for the producer's gate, and go into the rebuilt chain. Each attempt holds
   * the gate; between attempts writes run (and fail with 503 against the closed gateway)
   * rather than hang. Gives up only when serve shuts down.
   */
  function recover(why: string): Promise<void> {
    if (closing) return Promise.resolve();
    recovering ??= (async () => {
      log.warn(`${why}: restarting anvil and rebuilding the chain from its checkpoint and log`);
      for (let attempt = 1; !closing; attempt++) {
        try {
          const restored = await producer.exclusive(async () => {
            rebuilding = true;
            gateway.close();
            await anvil?.stop();
            try {
              const rebuilt = await restore(options, launch);
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
   * Dumps the chain while no block is being made, writes the dump beside the state (fsynced),
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
      const pointer = readPointer(store);
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
      await writeCheckpoint(stateDir, file, () => crashAt('crash-before-checkpoint'));
      crashAt('crash-in-checkpoint');
      store.transaction(() => {
        writePointer(store, { block: at.number, hash: at.hash });
        store.chainLog.truncateThrough(at.number);
      });
      // The old checkpoint goes only once the database points past it, on disk.
      await store.sync();
      removeCheckpointsExcept(stateDir, at.number);
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
  const maybeCheckpoint = () => {
    if (spaced(0) && producer.head().number - readPointer(store).block >= CHECKPOINT_EVERY_BLOCKS) {
      checkpointInBackground();
    }
  };
  const poller = setInterval(() => {
    if (recovering || closing) return;
    producer
      .poll()
      .then(maybeCheckpoint)
      .catch((error: unknown) =>
        log.error(`polling the chain failed: ${(error as Error).message}`),
      );
  }, POLL_MS);
  poller.unref();
  const timer = setInterval(() => {
    if (spaced(CHECKPOINT_AFTER_MS) && producer.head().number > readPointer(store).block) {
      checkpointInBackground();
    }
  }, CHECKPOINT_AFTER_MS / 4);
  timer.unref();

  return {
    /** The RPC URL others use (the gateway's). */
    rpcUrl: gateway.url,
    /** anvil's own URL, and the fetch the sandbox's own clients must use with it. */
    nodeUrl,
    fetch: ownFetch,
    rpc: chainRpc,
    deployment,
    producer,
    afterCommit: maybeCheckpoint,
    checkpoint,
    recovering: () => recovering !== undefined,
    async close(options: { checkpoint: boolean }) {
      clearInterval(poller);
      clearInterval(timer);
      // No new recovery attempt; writes already queued finish first.
      closing = true;
      await recovering;
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
function catchUpClock(clock: SandboxClock, blocks: LoggedBlock[], log: ChainLogger): void {
  const last = blocks.at(-1);
  if (!last) return;
  const behind = last.timestamp - clock.nowSeconds();
  if (behind <= 0) return;
  clock.raiseTo(last.timestamp);
  log.warn(
    `block ${last.number} carries a time ${behind} s ahead of the sandbox clock (mined over the RPC URL?): the clock moves up to it`,
  );
}

function readPointer(store: Store): CheckpointPointer {
  const raw = store.meta.get(META_CHECKPOINT);
  return raw
    ? (JSON.parse(raw) as CheckpointPointer)
    : { block: GENESIS.block_number, hash: GENESIS.block_hash as Hash };
}

function writePointer(store: Store, pointer: CheckpointPointer): void {
  store.meta.set(META_CHECKPOINT, JSON.stringify(pointer));
}

/**
 * The checkpoint the database points to, after adopting one a crash wrote but did not record
 * (the log still has its block); any other file in chain/ is removed.
 */
function currentPointer(options: LocalChainOptions): CheckpointPointer {
  const pointer = adoptNewerCheckpoint(options);
  // Whatever a crash left beside the checkpoint in use: temp files, superseded checkpoints.
  removeCheckpointsExcept(options.stateDir, pointer.block);
  return pointer;
}

function adoptNewerCheckpoint(options: LocalChainOptions): CheckpointPointer {
  const { store, stateDir } = options;
  const pointer = readPointer(store);
  const newest = listCheckpoints(stateDir)[0];
  if (newest !== undefined && newest > pointer.block) {
    // A checkpoint newer than the database's: a crash between writing it and recording it
    // (the log still has its block), or a database older than the chain.
    const file = readCheckpoint(stateDir, newest);
    if (store.chainLog.find(newest)?.hash !== file.block_hash) {
      throw new StartupError(
        `${stateDir}/sandbox.db is older than the chain checkpoint at block ${newest} beside it ` +
          '(was an older copy of the database restored?); restore the database and chain/ from the same backup',
      );
    }
    store.transaction(() => {
      writePointer(store, { block: newest, hash: file.block_hash });
      store.chainLog.truncateThrough(newest);
    });
    return readPointer(store);
  }
  return pointer;
}

/**
 * Takes over the anvil a killed serve of this state dir left running, when its chain is the
 * logged one: nothing is replayed. Blocks past the log's last (mined, never acknowledged) are
 * rolled back and transactions waiting in its pool are dropped, as a rebuild would. Resolves
 * undefined, having stopped that anvil, when it cannot be used (the rebuild then starts).
 */
async function takeOver(
  options: LocalChainOptions,
  adopted: (anvil: AnvilProcess) => void,
): Promise<{ deployment: Deployment; head: BlockHead } | undefined> {
  const { store, stateDir, log } = options;
  const found = survivingAnvil(stateDir);
  const known = store.meta.get(META_DEPLOYMENT);
  if (!found) return undefined;
  const anvil = adoptAnvil(stateDir, found);
  const rpc = createRpcClient(anvil.rpcUrl);
  try {
    const pointer = currentPointer(options);
    let last: { number: number; hash: Hash } = { number: pointer.block, hash: pointer.hash };
    for (const block of store.chainLog.after(pointer.block)) last = block;
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

/**
 * Starts anvil (with `launch`) from the last checkpoint and replays the log onto it with the
 * logged timestamps, checking that every block comes out with its logged hash.
 */
async function restore(
  options: LocalChainOptions,
  launch: (loadState: string) => Promise<RpcClient>,
): Promise<{ deployment: Deployment; head: BlockHead }> {
  const { store, stateDir } = options;
  const pointer = currentPointer(options);
  let source: Pick<
    Checkpoint,
    'block_number' | 'block_hash' | 'block_timestamp' | 'deployment' | 'state'
  >;
  if (pointer.block === GENESIS.block_number) {
    source = GENESIS as unknown as typeof source;
  } else {
    const file = readCheckpoint(stateDir, pointer.block);
    if (file.sandbox_id !== options.sandboxId || file.block_hash !== pointer.hash) {
      throw new StartupError(
        `the chain checkpoint for block ${pointer.block} in ${stateDir}/chain belongs to another sandbox; ` +
          'restore the database and chain/ from the same backup',
      );
    }
    source = file;
  }
  // anvil loads the state from a file at start: anvil_loadState refuses a request body over a
  // few MB, which a chain of a few hundred busy blocks already is. The file is the dump's JSON
  // (anvil_dumpState gzips it), removed again once anvil has read it.
  const loadPath = join(stateDir, LOAD_STATE_FILE);
  let rpc: RpcClient;
  try {
    writeFileSync(loadPath, gunzipSync(Buffer.from(source.state.slice(2), 'hex')), {
      mode: 0o600,
    });
    rpc = await launch(loadPath);
    // anvil refuses to mine below its own start time; the log's blocks are older than that.
    await rpc.call('anvil_setTime', [source.block_timestamp]);
  } catch (error) {
    throw new StartupError(
      `anvil could not load the chain checkpoint at block ${source.block_number}: ${(error as Error).message}`,
    );
  } finally {
    rmSync(loadPath, { force: true });
  }
  const loaded = await latestHead(rpc);
  if (loaded.number !== source.block_number || loaded.hash !== source.block_hash) {
    throw new StartupError(
      `the chain checkpoint at block ${source.block_number} loaded as block ${loaded.number} (${loaded.hash}); it is damaged`,
    );
  }
  // The routes trust the checkpoint's addresses: each must hold its contract in the chain loaded.
  const misplaced = await findMisplacedContracts(rpc, source.deployment);
  if (misplaced.length > 0) {
    throw new StartupError(
      pointer.block === GENESIS.block_number
        ? `the built-in genesis checkpoint is damaged: ${describeMisplaced(misplaced, 'in its chain')}; reinstall agentctl`
        : `the chain checkpoint ${checkpointPath(stateDir, pointer.block)} is damaged: ` +
            `deployment.${describeMisplaced(misplaced, 'in the chain it holds')}; ` +
            'restore the state directory from a backup, or start with a new --state directory',
    );
  }
  const head = await replayLog(rpc, loaded, [...store.chainLog.after(pointer.block)], options);
  store.meta.set(META_DEPLOYMENT, JSON.stringify(source.deployment));
  return { deployment: source.deployment, head };
}

/**
 * Mines the logged blocks again: each one's transactions, at its timestamp, two requests a
 * block (anvil answers a batch's calls in no fixed order, so a block's mining cannot share
 * its transactions' request). The blocks' hashes are read back afterwards, many at once.
 * Normally every block comes out identical. If the chain was changed outside transactions
 * before the crash (anvil's cheat methods over the RPC URL), hashes differ from there on: the
 * same transactions are then kept in blocks of the same numbers, the log is updated to the
 * rebuilt blocks, and this is reported.
 */
async function replayLog(
  rpc: RpcClient,
  start: BlockHead,
  blocks: LoggedBlock[],
  options: LocalChainOptions,
): Promise<BlockHead> {
  let expected = start.number;
  for (const block of blocks) {
    if (block.number !== ++expected) {
      throw new StartupError(
        `the chain log does not continue block ${expected - 1} with block ${block.number}; the log is damaged`,
      );
    }
  }
  for (const block of blocks) {
    const sent = await rpc.batch(
      block.txs.map((raw) => ({ method: 'eth_sendRawTransaction', params: [raw] })),
    );
    const refused = sent.find((result) => !result.ok);
    if (refused && !refused.ok) {
      throw new StartupError(
        `replaying block ${block.number} failed: ${refused.error.message}; the log is damaged`,
      );
    }
    await rpc.call('evm_mine', [{ timestamp: block.timestamp }]);
  }
  let head = await latestHead(rpc);
  const last = blocks.at(-1)?.number ?? start.number;
  if (head.number !== last) {
    throw new StartupError(
      `replaying the log up to block ${last} gave block ${head.number}; the chain cannot be rebuilt`,
    );
  }
  const rehashed: Array<{ number: number; hash: Hash; parentHash: Hash }> = [];
  for (let from = 0; from < blocks.length; from += HEADERS_PER_READ) {
    const slice = blocks.slice(from, from + HEADERS_PER_READ);
    const headers = await rpc.batch(
      slice.map((block) => ({
        method: 'eth_getBlockByNumber',
        params: [toQuantity(block.number), false],
      })),
    );
    slice.forEach((block, i) => {
      const result = headers[i];
      const header = result?.ok ? (result.value as RpcBlock | null) : null;
      if (!header || Number(header.number) !== block.number) {
        throw new StartupError(
          `replaying block ${block.number} gave no such block; the chain cannot be rebuilt`,
        );
      }
      if (header.hash !== block.hash) {
        rehashed.push({ number: block.number, hash: header.hash, parentHash: header.parentHash });
      }
    });
  }
  const first = rehashed[0];
  if (first) {
    options.log.warn(
      `${rehashed.length} block(s) from block ${first.number} on replayed with other hashes than the logged ones: ` +
        'the chain had been changed outside transactions (anvil cheat methods over the RPC URL?); ' +
        'their transactions are all kept, in blocks of the same numbers',
    );
    options.store.transaction(() => {
      for (const block of rehashed) {
        options.store.chainLog.rehash(block.number, block.hash, block.parentHash);
      }
    });
    head = await latestHead(rpc);
  }
  return head;
}

async function latestHead(rpc: RpcClient): Promise<BlockHead> {
  const block = await rpc.call<{ number: Hex; hash: Hash; timestamp: Hex }>(
    'eth_getBlockByNumber',
    ['latest', false],
  );
  return { number: Number(block.number), hash: block.hash, timestamp: Number(block.timestamp) };
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
