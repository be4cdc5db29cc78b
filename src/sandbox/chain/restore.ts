import { promisify } from 'node:util';
import { gunzip } from 'node:zlib';
import type { Hash, Hex } from 'viem';
import { StartupError } from '../errors.ts';
import type { Store, StoreTx } from '../store/index.ts';
import type { LoggedBlock } from '../store/types.ts';
import { AnvilMissingError } from './anvil.ts';
import type { Checkpoint } from './checkpoint.ts';
import type { CheckpointStore } from './checkpoint-store.ts';
import { type Deployment, describeMisplaced, findMisplacedContracts } from './deployment.ts';
import { GENESIS } from './genesis.ts';
import type { BlockHead } from './producer.ts';
import { type RpcBlock, type RpcClient, toQuantity } from './rpc.ts';

/**
 * Rebuilding the sandbox's chain from what the state dir holds: anvil started from the last
 * checkpoint, then the chain log mined onto it again, block by block, at the logged times.
 * The primary does this at start and after a crash; the warm standby (standby.ts) does the
 * same, then follows the log as it grows.
 */

export const META_CHECKPOINT = 'chain_checkpoint';
/** The contracts' addresses in the chain last restored: a taken-over anvil is checked against them. */
export const META_DEPLOYMENT = 'chain_deployment';
/** Replayed blocks whose hashes are read back in one request. */
const HEADERS_PER_READ = 500;
const unzip = promisify(gunzip);
/** Where anvil --load-state reads a copy of the chain from while it starts (its standby's too). */
const PRIMARY_LOAD_FILE = 'anvil-load-state.json';
export const STANDBY_LOAD_FILE = 'anvil-standby-load-state.json';
export const LOAD_FILES = [PRIMARY_LOAD_FILE, STANDBY_LOAD_FILE];

/** Where the chain was last checkpointed: the genesis, or a checkpoint of the CheckpointStore. */
export interface CheckpointPointer {
  block: number;
  hash: Hash;
}

export interface RestoreOptions {
  /** Where the checkpoints are: the state dir's chain/, or the database. */
  checkpoints: CheckpointStore;
  sandboxId: string;
  store: Store;
  log: { warn(message: string): void };
}

export async function readPointer(store: Pick<Store, 'meta'>): Promise<CheckpointPointer> {
  const raw = await store.meta.get(META_CHECKPOINT);
  return raw
    ? (JSON.parse(raw) as CheckpointPointer)
    : { block: GENESIS.block_number, hash: GENESIS.block_hash as Hash };
}

/** The chain's last logged block: the newest in the log, or the checkpoint's when none is past it. */
export async function lastLogged(store: Store): Promise<{ number: number; hash: Hash }> {
  const pointer = await readPointer(store);
  const newest = await store.chainLog.last();
  return newest && newest.number > pointer.block
    ? { number: newest.number, hash: newest.hash }
    : { number: pointer.block, hash: pointer.hash };
}

/** Call inside a transaction (`tx`), with the log's truncation. */
export async function writePointer(
  tx: Pick<StoreTx, 'meta'>,
  pointer: CheckpointPointer,
): Promise<void> {
  await tx.meta.set(META_CHECKPOINT, JSON.stringify(pointer));
}

/**
 * The checkpoint the database points to, after adopting one a crash wrote but did not record
 * (the log still has its block); every other checkpoint is removed. For a start only.
 */
export async function currentPointer(options: RestoreOptions): Promise<CheckpointPointer> {
  const pointer = await adoptNewerCheckpoint(options);
  // Whatever a crash left beside the checkpoint in use: temp files, superseded checkpoints.
  await options.checkpoints.prune(pointer.block);
  return pointer;
}

async function adoptNewerCheckpoint(options: RestoreOptions): Promise<CheckpointPointer> {
  const { store, checkpoints } = options;
  const pointer = await readPointer(store);
  const newest = await checkpoints.latest();
  if (newest !== undefined && newest > pointer.block) {
    // A checkpoint newer than the database's: a crash between writing it and recording it
    // (the log still has its block), or a database older than the chain.
    const file = await checkpoints.read(newest);
    if ((await store.chainLog.find(newest))?.hash !== file.block_hash) {
      throw new StartupError(checkpoints.words.olderLog(newest));
    }
    await store.transaction(async (tx) => {
      await writePointer(tx, { block: newest, hash: file.block_hash });
      await tx.chainLog.truncateThrough(newest);
    });
    return readPointer(store);
  }
  return pointer;
}

/** A copy of the chain at one block: a checkpoint, the genesis, or a dump of a running anvil. */
export type ChainCopy = Pick<
  Checkpoint,
  'block_number' | 'block_hash' | 'block_timestamp' | 'deployment' | 'state'
>;

/** The copy of the chain `pointer` names: the built-in genesis, or a checkpoint. */
export async function checkpointCopy(
  options: RestoreOptions,
  pointer: CheckpointPointer,
): Promise<ChainCopy> {
  const { checkpoints } = options;
  if (pointer.block === GENESIS.block_number) return GENESIS as unknown as ChainCopy;
  const file = await checkpoints.read(pointer.block);
  if (file.sandbox_id !== options.sandboxId || file.block_hash !== pointer.hash) {
    throw new StartupError(
      `the chain checkpoint for block ${pointer.block} in ${checkpoints.words.where} belongs to another sandbox; ` +
        checkpoints.words.mismatched,
    );
  }
  return file;
}

/**
 * Starts anvil (with `launch`, given the state file to load) from `source`, and checks it:
 * the loaded head is the copy's block, and every contract is where the deployment says.
 * `loadFile` names the file the dump is written to for anvil --load-state (where: see
 * CheckpointStore.withStateFile). A damaged checkpoint is reported naming it.
 */
export async function loadChain(
  options: RestoreOptions,
  source: ChainCopy,
  launch: (loadState: string) => Promise<RpcClient>,
  loadFile: string,
  /** A checkpoint (the genesis included), or a copy of the running chain (for the standby). */
  kind: 'checkpoint' | 'copy' = 'checkpoint',
): Promise<{ rpc: RpcClient; loaded: BlockHead }> {
  const { checkpoints } = options;
  const pointer = await readPointer(options.store);
  // anvil loads the state from a file at start: anvil_loadState refuses a request body over a
  // few MB, which a chain of a few hundred busy blocks already is. The file is the dump's JSON
  // (anvil_dumpState gzips it), removed again once anvil has read it; it is written on the
  // thread pool, as a running serve starts its standby this way.
  let rpc: RpcClient;
  try {
    rpc = await checkpoints.withStateFile(
      loadFile,
      await unzip(Buffer.from(source.state.slice(2), 'hex')),
      async (loadPath) => {
        const started = await launch(loadPath);
        // anvil refuses to mine below its own start time; the log's blocks are older than that.
        await started.call('anvil_setTime', [source.block_timestamp]);
        return started;
      },
    );
  } catch (error) {
    // anvil missing is said as it is, not as a checkpoint anvil could not load.
    if (error instanceof AnvilMissingError) throw error;
    throw new StartupError(
      `anvil could not load ${kind === 'copy' ? 'the copy of the chain' : 'the chain checkpoint'} at block ${source.block_number}: ${(error as Error).message}`,
    );
  }
  const loaded = await latestHead(rpc);
  if (
    kind === 'copy' &&
    (loaded.number !== source.block_number || loaded.hash !== source.block_hash)
  ) {
    throw new Error(
      `the copy of the chain at block ${source.block_number} loaded as block ${loaded.number}`,
    );
  }
  if (loaded.number !== source.block_number || loaded.hash !== source.block_hash) {
    throw new StartupError(
      `the chain checkpoint at block ${source.block_number} loaded as block ${loaded.number} (${loaded.hash}); it is damaged`,
    );
  }
  // The routes trust the checkpoint's addresses: each must hold its contract in the chain loaded.
  const misplaced = await findMisplacedContracts(rpc, source.deployment);
  if (misplaced.length > 0 && kind === 'copy') {
    throw new Error(
      `the copy of the chain lacks deployment.${describeMisplaced(misplaced, 'in it')}`,
    );
  }
  if (misplaced.length > 0) {
    const where =
      source.block_number === GENESIS.block_number
        ? 'the built-in genesis checkpoint'
        : `the chain checkpoint ${checkpoints.words.checkpoint(pointer.block)}`;
    throw new StartupError(
      source.block_number === GENESIS.block_number
        ? `${where} is damaged: ${describeMisplaced(misplaced, 'in its chain')}; reinstall agentctl`
        : `${where} is damaged: deployment.${describeMisplaced(misplaced, 'in the chain it holds')}; ` +
            checkpoints.words.damaged,
    );
  }
  return { rpc, loaded };
}

/**
 * Starts anvil (with `launch`) from the last checkpoint and replays the log onto it with the
 * logged timestamps, checking that every block comes out with its logged hash.
 */
export async function restore(
  options: RestoreOptions,
  launch: (loadState: string) => Promise<RpcClient>,
): Promise<{ deployment: Deployment; head: BlockHead }> {
  const { store } = options;
  const pointer = await currentPointer(options);
  const source = await checkpointCopy(options, pointer);
  const { rpc, loaded } = await loadChain(options, source, launch, PRIMARY_LOAD_FILE);
  const head = await replayLog(rpc, loaded, await store.chainLog.after(pointer.block), options);
  await store.meta.set(META_DEPLOYMENT, JSON.stringify(source.deployment));
  return { deployment: source.deployment, head };
}

/**
 * Mines the logged blocks again: each one's transactions, at its timestamp, two requests a
 * block (anvil answers a batch's calls in no fixed order, so a block's mining cannot share
 * its transactions' request). Throws StartupError when the node refuses a transaction.
 */
export async function mineLogged(rpc: RpcClient, blocks: LoggedBlock[]): Promise<void> {
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
}

/** The headers of blocks `numbers` (hash and parent), many in one request. */
export async function readHeaders(
  rpc: RpcClient,
  numbers: number[],
): Promise<Array<{ number: number; hash: Hash; parentHash: Hash }>> {
  const headers: Array<{ number: number; hash: Hash; parentHash: Hash }> = [];
  for (let from = 0; from < numbers.length; from += HEADERS_PER_READ) {
    const slice = numbers.slice(from, from + HEADERS_PER_READ);
    const results = await rpc.batch(
      slice.map((n) => ({ method: 'eth_getBlockByNumber', params: [toQuantity(n), false] })),
    );
    slice.forEach((n, i) => {
      const result = results[i];
      const header = result?.ok ? (result.value as RpcBlock | null) : null;
      if (!header || Number(header.number) !== n) {
        throw new StartupError(
          `replaying block ${n} gave no such block; the chain cannot be rebuilt`,
        );
      }
      headers.push({ number: n, hash: header.hash, parentHash: header.parentHash });
    });
  }
  return headers;
}

/**
 * Mines the logged blocks again (mineLogged), then reads their hashes back, many at once.
 * Normally every block comes out identical. If the chain was changed outside transactions
 * before the crash (anvil's cheat methods over the RPC URL), hashes differ from there on: the
 * same transactions are then kept in blocks of the same numbers, the log is updated to the
 * rebuilt blocks, and this is reported.
 */
export async function replayLog(
  rpc: RpcClient,
  start: BlockHead,
  blocks: LoggedBlock[],
  options: RestoreOptions,
): Promise<BlockHead> {
  let expected = start.number;
  for (const block of blocks) {
    if (block.number !== ++expected) {
      throw new StartupError(
        `the chain log does not continue block ${expected - 1} with block ${block.number}; the log is damaged`,
      );
    }
  }
  await mineLogged(rpc, blocks);
  let head = await latestHead(rpc);
  const last = blocks.at(-1)?.number ?? start.number;
  if (head.number !== last) {
    throw new StartupError(
      `replaying the log up to block ${last} gave block ${head.number}; the chain cannot be rebuilt`,
    );
  }
  const headers = await readHeaders(
    rpc,
    blocks.map((block) => block.number),
  );
  const rehashed = headers.filter((header, i) => header.hash !== blocks[i]?.hash);
  const first = rehashed[0];
  if (first) {
    options.log.warn(
      `${rehashed.length} block(s) from block ${first.number} on replayed with other hashes than the logged ones: ` +
        'the chain had been changed outside transactions (anvil cheat methods over the RPC URL?); ' +
        'their transactions are all kept, in blocks of the same numbers',
    );
    await options.store.transaction(async (tx) => {
      for (const block of rehashed) {
        await tx.chainLog.rehash(block.number, block.hash, block.parentHash);
      }
    });
    head = await latestHead(rpc);
  }
  return head;
}

export async function latestHead(rpc: RpcClient): Promise<BlockHead> {
  const block = await rpc.call<{ number: Hex; hash: Hash; timestamp: Hex }>(
    'eth_getBlockByNumber',
    ['latest', false],
  );
  return { number: Number(block.number), hash: block.hash, timestamp: Number(block.timestamp) };
}
