import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import type { Address, Hash, Hex } from 'viem';
import type { SandboxClock } from '../clock.ts';
import { StartupError } from '../errors.ts';
import { crashAt } from '../faults.ts';
import type { Store } from '../store/index.ts';
import { type AnvilProcess, startAnvil } from './anvil.ts';
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
import {
  type BlockHead,
  type BlockProducer,
  createBlockProducer,
  type LoggedBlock,
} from './producer.ts';
import { createRpcClient, type RpcClient } from './rpc.ts';

/** A checkpoint is taken once this many blocks are logged after the last one… */
export const CHECKPOINT_EVERY_BLOCKS = 2000;
/** …or when blocks have waited this long, so that a restart never replays for long. */
const CHECKPOINT_AFTER_MS = 60_000;
/** How often blocks mined, and transactions sent, by others over the RPC URL are picked up. */
const POLL_MS = 250;
const META_CHECKPOINT = 'chain_checkpoint';
/** The checkpoint's state, written for anvil --load-state while anvil starts. */
const LOAD_STATE_FILE = 'anvil-load-state.json';

export interface ChainLogger {
  info(message: string): void;
  warn(message: string): void;
  error(message: string): void;
}

export interface LocalChainOptions {
  stateDir: string;
  sandboxId: string;
  store: Store;
  clock: SandboxClock;
  log: ChainLogger;
  /** Turns a reverted transaction into its reason (needs the contracts' ABIs). */
  revertReason(rpc: RpcClient, hash: Hash): Promise<string>;
  /**
   * Runs after each checkpoint is on disk, with its block, before the checkpoint resolves:
   * whoever keeps copies of the chain's state may compare them with the state the checkpoint
   * made permanent. A failure is logged; the checkpoint stands.
   */
  afterCheckpoint?(block: number): Promise<void>;
}

/** Where the chain was last checkpointed: the genesis, or a file in chain/. */
interface CheckpointPointer {
  block: number;
  hash: Hash;
}

/**
 * The sandbox's own chain: an anvil that mines only when the block producer says so, rebuilt
 * at start (and whenever anvil dies or the chain is changed under it) from the last
 * checkpoint and the chain log. Checkpoints run in the background, off the write path.
 */
export async function startLocalChain(options: LocalChainOptions) {
  const { store, stateDir, log } = options;
  let anvil: AnvilProcess | undefined;
  let rpc: RpcClient | undefined;
  // A free port at first; a restarted anvil keeps it, so the RPC URL never changes.
  let port = 0;
  /** Starts anvil from a state file; the RPC client is made once, for the first one. */
  const launch = async (loadState: string): Promise<RpcClient> => {
    anvil = await startAnvil({ stateDir, mining: 'manual', port, loadState });
    port = Number(new URL(anvil.rpcUrl).port);
    rpc ??= createRpcClient(anvil.rpcUrl);
    return rpc;
  };
  let closing = false;
  let recovering: Promise<void> | undefined;
  let checkpointing: Promise<number> | undefined;
  let deployment: Deployment;
  let head: BlockHead;

  try {
    ({ deployment, head } = await restore(options, launch));
  } catch (error) {
    await anvil?.stop();
    throw error;
  }
  const started = anvil as AnvilProcess;
  const chainRpc = rpc as RpcClient;

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
  watchAnvil(started);

  /**
   * Restarts anvil on the same port and rebuilds the chain from the checkpoint and the log.
   * Each attempt holds the producer's gate; between attempts writes run (and fail with 503
   * against the dead chain) rather than hang. Gives up only when serve shuts down.
   */
  function recover(why: string): Promise<void> {
    if (closing) return Promise.resolve();
    recovering ??= (async () => {
      log.warn(`${why}: restarting anvil and rebuilding the chain from its checkpoint and log`);
      for (let attempt = 1; !closing; attempt++) {
        try {
          const restored = await producer.exclusive(async () => {
            await anvil?.stop();
            try {
              return await restore(options, launch);
            } finally {
              if (anvil) watchAnvil(anvil);
            }
          });
          producer.setHead(restored.head);
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
   * then cuts the log back to it, and resolves with the block it holds. A chain that went back
   * or lost the protocol's contracts is not checkpointed: the last good checkpoint and the log
   * are kept, the chain is rebuilt, and the promise rejects saying why.
   */
  function checkpoint(): Promise<number> {
    checkpointing ??= (async () => {
      const pointer = readPointer(store);
      const taken = await producer.exclusive(async () => {
        if (recovering) throw new Error('the chain is being rebuilt; try again shortly');
        const at = producer.head();
        if (at.number === pointer.block) return undefined;
        const problem = await checkChain(chainRpc, at, deployment);
        if (problem) {
          log.warn(`not checkpointing: ${problem}; keeping the last good state`);
          void recover(problem);
          throw new Error(`${problem}; the last good state is kept and the chain rebuilt`);
        }
        return { at, state: await chainRpc.call<Hex>('anvil_dumpState') };
      });
      if (!taken) return pointer.block;
      // The blocks the dump holds must be in the log on disk before the dump is: a start
      // adopts a checkpoint only when the log knows its block.
      await store.sync();
      const file: Checkpoint = {
        format: CHECKPOINT_FORMAT,
        sandbox_id: options.sandboxId,
        chain_id: GENESIS.chain_id,
        block_number: taken.at.number,
        block_hash: taken.at.hash,
        block_timestamp: taken.at.timestamp,
        deployment,
        state: taken.state,
      };
      await writeCheckpoint(stateDir, file, () => crashAt('crash-before-checkpoint'));
      crashAt('crash-in-checkpoint');
      store.transaction(() => {
        writePointer(store, { block: taken.at.number, hash: taken.at.hash });
        store.chainLog.truncateThrough(taken.at.number);
      });
      // The old checkpoint goes only once the database points past it, on disk.
      await store.sync();
      removeCheckpointsExcept(stateDir, taken.at.number);
      await options.afterCheckpoint?.(taken.at.number).catch((error: unknown) => {
        log.warn(`after the checkpoint at block ${taken.at.number}: ${(error as Error).message}`);
      });
      return taken.at.number;
    })().finally(() => {
      checkpointing = undefined;
    });
    return checkpointing;
  }

  /** A checkpoint nobody waits for: a failure is logged; the log still has every block. */
  const checkpointInBackground = () => {
    checkpoint().catch((error: unknown) => {
      log.error(`checkpoint failed: ${(error as Error).message}`);
    });
  };

  const maybeCheckpoint = () => {
    if (producer.head().number - readPointer(store).block >= CHECKPOINT_EVERY_BLOCKS) {
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
    if (!recovering && !closing && producer.head().number > readPointer(store).block) {
      checkpointInBackground();
    }
  }, CHECKPOINT_AFTER_MS);
  timer.unref();

  return {
    rpcUrl: started.rpcUrl,
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
 * Starts anvil (with `launch`) from the last checkpoint and replays the log onto it, block by
 * block with the logged timestamps, checking that every block comes out with its logged hash.
 */
async function restore(
  options: LocalChainOptions,
  launch: (loadState: string) => Promise<RpcClient>,
): Promise<{ deployment: Deployment; head: BlockHead }> {
  const { store, stateDir } = options;
  let pointer = readPointer(store);
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
    pointer = readPointer(store);
  }

  // Whatever a crash left beside the checkpoint in use: temp files, superseded checkpoints.
  removeCheckpointsExcept(stateDir, pointer.block);
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
  let head = await latestHead(rpc);
  if (head.number !== source.block_number || head.hash !== source.block_hash) {
    throw new StartupError(
      `the chain checkpoint at block ${source.block_number} loaded as block ${head.number} (${head.hash}); it is damaged`,
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
  for (const block of [...store.chainLog.after(pointer.block)]) {
    head = await replayBlock(rpc, head, block, options);
  }
  return { deployment: source.deployment, head };
}

/**
 * Mines a logged block again: its transactions, at its timestamp. Normally the block comes
 * out identical. If the chain was changed outside transactions before the crash (anvil's
 * cheat methods over the RPC URL), its hash differs: the same transactions are then kept in
 * blocks of the same numbers, the log is updated to the rebuilt blocks, and this is reported.
 */
async function replayBlock(
  rpc: RpcClient,
  parent: BlockHead,
  block: LoggedBlock,
  options: LocalChainOptions,
) {
  if (block.number !== parent.number + 1) {
    throw new StartupError(
      `the chain log does not continue block ${parent.number} with block ${block.number}; the log is damaged`,
    );
  }
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
  const head = await latestHead(rpc);
  if (head.number !== block.number) {
    throw new StartupError(
      `replaying block ${block.number} gave block ${head.number}; the chain cannot be rebuilt`,
    );
  }
  if (head.hash !== block.hash) {
    options.log.warn(
      `block ${block.number} replayed with hash ${head.hash}, not the logged ${block.hash}: ` +
        'the chain had been changed outside transactions (anvil cheat methods over the RPC URL?); ' +
        'its transactions are all kept, in blocks of the same numbers',
    );
    options.store.transaction(() =>
      options.store.chainLog.rehash(block.number, head.hash, parent.hash),
    );
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

/** Why the chain must not be checkpointed, or undefined when it is the one the log describes. */
async function checkChain(
  rpc: RpcClient,
  expected: BlockHead,
  deployment: Deployment,
): Promise<string | undefined> {
  const latest = await latestHead(rpc);
  if (latest.number < expected.number) {
    return `the chain's head went back from block ${expected.number} to ${latest.number}`;
  }
  if (latest.number !== expected.number || latest.hash !== expected.hash) {
    return `the chain's head is block ${latest.number} (${latest.hash}), not the logged ${expected.number} (${expected.hash})`;
  }
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
