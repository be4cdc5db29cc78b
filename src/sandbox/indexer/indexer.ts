import { chmodSync, copyFileSync } from 'node:fs';
import type { DatabaseSync } from 'node:sqlite';
import {
  type Address,
  encodeFunctionData,
  getAddress,
  type Hash,
  type Hex,
  pad,
  parseAbi,
  toEventSelector,
} from 'viem';
import { VAULT_IDS } from '../../api/schemas/values.ts';
import { type Deployment, VAULT_CONFIG } from '../chain/deployment.ts';
import { type RpcBlock, type RpcClient, type RpcResult, toQuantity } from '../chain/rpc.ts';
import { copyDatabase } from '../store/copy.ts';
import { IndexUnavailableError, isIndexFileFailure } from './failure.ts';
import { createLogSource } from './log-source.ts';
import {
  type BlockChanges,
  createProjection,
  EVENTS_ABI,
  type FailedCall,
  type RawLog,
  type VaultState,
} from './projection.ts';
import { type StateRow, toState } from './reads.ts';
import { DERIVED_TABLES, openIndexDatabase, removeIndexFiles } from './schema.ts';
import { totalAssetsAt } from './vault-math.ts';

export interface IndexerOptions {
  /** index.db in the state dir. */
  path: string;
  rpc: RpcClient;
  chainId: number;
  deployment: Deployment;
  /**
   * Blocks this deep are final (0 on the sandbox's own chain): the poll indexes the head less
   * this many blocks, and a reorganisation is looked for no deeper (see commonAncestor).
   */
  finalityDepth?: number;
  /**
   * The first block worth reading: the deployment's, on a chain with history before it.
   * Default 1: block 0 is the genesis, and a chain restored from a checkpoint may answer a
   * block 0 that is not the parent of its block 1.
   */
  startBlock?: number;
  /**
   * The highest block that may be indexed. The sandbox's own chain gives the head of its
   * chain log: a block is indexed only once it is in sandbox.db, so that the index, kept beside
   * it, can tell when sandbox.db has lost blocks (see missingFrom), and a rebuild, which brings
   * back every logged block, never finds the index ahead of the chain.
   */
  ceiling?: () => number;
  /** True while the chain cannot be read (it is being rebuilt): the background poll waits. */
  paused?: () => boolean;
  log: { warn(message: string): void; error(message: string): void };
}

/** At most this many blocks are read and committed at once. */
const MAX_BLOCKS_PER_STEP = 500;
/** Writes whose indexing wait is kept, for /sandbox/info and the benchmark. */
const WAIT_SAMPLES = 1024;
/** How often the chain's head is looked at, for activity that did not come through us. */
export const INDEX_POLL_MS = 200;
/** The longest pause between two tries of a poll that keeps failing. */
const INDEX_RETRY_MAX_MS = 2000;
/** A range that reads inconsistently (the chain moved while it was read) is read again… */
const REREADS = 3;
/** …after this pause, and then the sync fails and the poll tries again later. */
const REREAD_PAUSE_MS = 50;

/** What one commit changed. After a reorg every vault counts as changed. */
export interface IndexCommit {
  vaults: Set<string>;
  transactions: Array<{ blockNumber: number; logIndex: number }>;
  reorg: boolean;
}

type StepOutcome = 'done' | 'more' | 'reread';

/** Each vault's state as the chain held it after one block (see observe). */
export interface ChainObservation {
  block: { number: number; hash: Hash };
  states: Map<string, VaultState>;
}

/** The last indexed block: what a new block's parentHash must match, and the index's time. */
export type Checkpoint = Readonly<{ number: number; hash: Hash; timestamp: number }>;

/** topic0 of every event the derived tables are built from. */
const TOPICS: Hex[] = [
  ...new Set(
    EVENTS_ABI.filter((item) => item.type === 'event').map((item) => toEventSelector(item)),
  ),
];
const TRANSFER_TOPIC = toEventSelector('Transfer(address,address,uint256)');
type VaultId = (typeof VAULT_IDS)[number];

interface RpcReceipt {
  blockHash: Hash;
  transactionHash: Hash;
  transactionIndex: Hex;
  status: Hex;
  from: Address;
  to: Address | null;
  logs: RpcLog[];
}

interface RpcLog {
  address: Address;
  topics: Hex[];
  data: Hex;
  blockNumber: Hex;
  blockHash: Hash;
  transactionHash: Hash;
  transactionIndex: Hex;
  logIndex: Hex;
  removed?: boolean;
}

interface Header {
  number: number;
  hash: Hash;
  parentHash: Hash;
  timestamp: number;
  transactionCount: number;
  /** Each transaction's input, by index (on a dev chain, where blocks are read whole). */
  inputs?: Hex[];
}

/**
 * Follows the chain into index.db. `syncTo(n)` indexes up to block n and resolves once it is
 * committed: the write path awaits it before answering, so a client reads its own write from
 * /v1 at once. A poll picks up everything else (someone calling a vault over the RPC URL)
 * within INDEX_POLL_MS. Each step compares the next block's parentHash with the checkpoint;
 * on a mismatch it finds the common ancestor, cuts the raw data back to it and derives the
 * rest again.
 */
export function createIndexer(options: IndexerOptions) {
  const { rpc, deployment } = options;
  const vaults = new Map<string, VaultId>(
    VAULT_IDS.map((id) => [deployment.vaults[id].toLowerCase(), id]),
  );
  const usdc = deployment.usdc.toLowerCase();
  const registry = deployment.strategy_registry.toLowerCase();
  const watched = [...vaults.keys(), usdc, registry] as Address[];
  const vaultTopics = new Set([...vaults.keys()].map((vault) => pad(vault as Hex).toLowerCase()));
  const identity = JSON.stringify({ chainId: options.chainId, contracts: watched });
  const projectionConfig = {
    usdc,
    registry,
    vaults: new Map(
      [...vaults].map(([address, id]) => [address, { async: VAULT_CONFIG[id].async }]),
    ),
  };
  let db: DatabaseSync = openIndexDatabase(options.path, identity, options.log.warn);
  let projection = createProjection(db, projectionConfig);
  const finality = options.finalityDepth ?? 0;
  // On a dev chain, blocks are read whole and events come from receipts (see step()).
  const fromReceipts = finality === 0;
  let running: Promise<void> = Promise.resolve();
  let closed = false;
  let timer: NodeJS.Timeout | undefined;
  /** Moves with every commit (a step, a rollback): what /v1's answer cache is keyed on. */
  let version = 0;
  /** Told of every commit, after it (graphql/live.ts publishes subscriptions from it). */
  const commitListeners = new Set<(changes: IndexCommit) => void>();
  function committed(changes: IndexCommit): void {
    for (const listener of commitListeners) {
      try {
        listener(changes);
      } catch (error) {
        options.log.warn(`a listener of the index failed: ${(error as Error).message}`);
      }
    }
  }
  /** How long the last writes waited to be indexed, in ms (a ring of WAIT_SAMPLES). */
  const waits: number[] = [];
  let waitCount = 0;

  const prepare = (db: DatabaseSync) => ({
    checkpoint: db.prepare(
      'SELECT number, hash, timestamp FROM blocks ORDER BY number DESC LIMIT 1',
    ),
    hashAt: db.prepare('SELECT hash FROM blocks WHERE number = ?'),
    timestampAt: db.prepare('SELECT timestamp FROM blocks WHERE number = ?'),
    stateAtBlock: db.prepare(
      `SELECT balance, reserved, total_supply, apy_bps, last_accrual FROM vault_states
       WHERE vault = ? AND block_number <= ? ORDER BY block_number DESC LIMIT 1`,
    ),
    correction: db.prepare(
      `INSERT INTO vault_corrections (block_number, vault, balance, reserved, total_supply, apy_bps, last_accrual)
       VALUES (?, ?, ?, ?, ?, ?, ?)
       ON CONFLICT (block_number, vault) DO UPDATE SET balance = excluded.balance,
         reserved = excluded.reserved, total_supply = excluded.total_supply,
         apy_bps = excluded.apy_bps, last_accrual = excluded.last_accrual`,
    ),
    block: db.prepare(
      'INSERT INTO blocks (number, hash, parent_hash, timestamp) VALUES (?, ?, ?, ?)',
    ),
    log: db.prepare(
      `INSERT INTO logs (block_number, log_index, block_hash, tx_index, tx_hash, address, topic0, topic1, topic2, topic3, data)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    ),
    failed: db.prepare(
      `INSERT INTO failed_calls (block_number, tx_index, tx_hash, from_address, to_address, input)
       VALUES (?, ?, ?, ?, ?, ?)`,
    ),
  });
  let statements = prepare(db);

  /**
   * Set once index.db has failed (a damaged page, a disk that no longer takes it): reads then
   * answer IndexUnavailableError, never what the file says, until the file has been started
   * afresh (`reopened`) and the chain indexed into it again.
   */
  let failure: { reason: string; reopened: boolean } | undefined;

  function fail(error: unknown, reason = `index.db failed (${(error as Error).message})`): string {
    if (!failure) {
      options.log.error(
        `${reason}: the data API answers 503 (INDEX_UNAVAILABLE) while it is rebuilt from the chain`,
      );
    }
    failure = { reason, reopened: false };
    // Every answer kept for the last version (the /v1 and GraphQL caches) is dropped.
    version++;
    return reason;
  }

  /** Deletes index.db and opens it empty: every block is indexed into it again. */
  function reopen(): void {
    try {
      db.close();
    } catch {
      // A failed file may not close cleanly; it is deleted next.
    }
    removeIndexFiles(options.path);
    db = openIndexDatabase(options.path, identity, options.log.warn);
    projection = createProjection(db, projectionConfig);
    statements = prepare(db);
    lastCheckpoint = undefined;
  }

  /**
   * Rebuilds a failed index.db from the chain, in the background poll. Its subscribers hear
   * nothing of the blocks indexed again, and one reorg-like commit (every vault changed) once
   * it answers again.
   */
  async function rebuild(): Promise<void> {
    await serially(async () => {
      if (closed || !failure || failure.reopened) return;
      reopen();
      failure.reopened = true;
    });
    await syncTo();
    if (closed || !failure?.reopened) return;
    failure = undefined;
    version++;
    committed({ vaults: new Set(vaults.keys()), transactions: [], reorg: true });
    options.log.warn(
      `index.db was rebuilt from the chain (up to block ${checkpoint()?.number ?? 0}); the data API answers from it again`,
    );
  }

  /** Runs a read of index.db: its file's failure is IndexUnavailableError, and starts a rebuild. */
  function read<T>(work: () => T): T {
    if (failure) throw new IndexUnavailableError(failure.reason);
    try {
      return work();
    } catch (error) {
      if (!isIndexFileFailure(error)) throw error;
      throw new IndexUnavailableError(fail(error));
    }
  }

  /** The last indexed block as of `version` (every read asks for it: the index's time). */
  let lastCheckpoint: { version: number; block: Checkpoint | undefined } | undefined;
  function checkpoint(): Checkpoint | undefined {
    if (lastCheckpoint?.version === version) return lastCheckpoint.block;
    const row = statements.checkpoint.get() as
      | { number: number; hash: Hash; timestamp: number }
      | undefined;
    const block =
      row &&
      Object.freeze({
        number: Number(row.number),
        hash: row.hash,
        timestamp: Number(row.timestamp),
      });
    lastCheckpoint = { version, block };
    return block;
  }

  /** Serialises every step: one writer, in order. */
  function serially(work: () => Promise<void>): Promise<void> {
    const next = running.then(work, work);
    running = next.catch(() => undefined);
    return next;
  }

  /** The chain's head block: its number and hash. */
  async function latestHead(): Promise<{ number: number; hash: Hash }> {
    const block = await rpc.call<RpcBlock>('eth_getBlockByNumber', ['latest', false]);
    return { number: Number(block.number), hash: block.hash };
  }

  /**
   * Goes back to the chain when it no longer holds the last indexed block: it went back
   * below it, or holds another block at its height (a rebuilt chain, anvil_reorg). A chain
   * that moved on is checked as it is read (step()).
   */
  async function followBack(head: { number: number; hash: Hash }): Promise<void> {
    const at = checkpoint();
    if (!at || head.number > at.number || (head.number === at.number && head.hash === at.hash)) {
      return;
    }
    const ancestor = await commonAncestor(head.number);
    options.log.warn(
      `the chain no longer holds indexed block ${at.number}: the index goes back to block ${ancestor} and follows the chain`,
    );
    rollBack(ancestor);
  }

  const headerCalls = (from: number, to: number, whole = false) =>
    range(from, to).map((n) => ({
      method: 'eth_getBlockByNumber',
      params: [toQuantity(n), whole],
    }));

  async function headers(from: number, to: number): Promise<Header[]> {
    return headersFrom(from, await rpc.batch(headerCalls(from, to)));
  }

  function headersFrom(from: number, results: RpcResult[]): Header[] {
    return results.map((result, i) => {
      const block = (result.ok ? result.value : undefined) as RpcBlock | undefined;
      if (!block) throw new Error(`block ${from + i} is not available`);
      const txs = block.transactions as Array<Hash | { input: Hex }>;
      return {
        number: Number(block.number),
        hash: block.hash,
        parentHash: block.parentHash,
        timestamp: Number(block.timestamp),
        transactionCount: txs.length,
        inputs: txs.map((tx) => (typeof tx === 'string' ? '0x' : tx.input)),
      };
    });
  }

  const receiptCalls = (from: number, to: number) =>
    range(from, to).map((n) => ({ method: 'eth_getBlockReceipts', params: [toQuantity(n)] }));

  /** Whether a log is one the derived tables are built from. */
  function isWatched(log: RpcLog): boolean {
    const address = log.address.toLowerCase();
    if (address === usdc) {
      // Only the asset's transfers into or out of a vault (not its approvals).
      return (
        log.topics[0] === TRANSFER_TOPIC &&
        (vaultTopics.has(log.topics[1] ?? '') || vaultTopics.has(log.topics[2] ?? ''))
      );
    }
    return (vaults.has(address) || address === registry) && TOPICS.includes(log.topics[0] as Hex);
  }

  /**
   * The watched events and the reverted vault calls of each block, from its receipts;
   * undefined when a block's receipts are not all there yet (anvil answers a new block's header
   * a moment before its receipts and logs, and eth_getLogs then answers nothing for it, which
   * could not be told from no events).
   */
  function eventsFrom(
    blocks: Header[],
    results: RpcResult[],
  ): { logs: RpcLog[]; failed: Map<number, FailedCall[]> } | undefined {
    const logs: RpcLog[] = [];
    const failed = new Map<number, FailedCall[]>();
    for (const [i, block] of blocks.entries()) {
      const result = results[i];
      const receipts = (result?.ok ? result.value : undefined) as RpcReceipt[] | null | undefined;
      if (!receipts || receipts.length !== block.transactionCount) return undefined;
      for (const receipt of receipts) {
        if (receipt.blockHash !== block.hash) return undefined;
        for (const log of receipt.logs) if (isWatched(log)) logs.push(log);
        const to = receipt.to?.toLowerCase();
        if (Number(receipt.status) === 0 && to && vaults.has(to)) {
          const txIndex = Number(receipt.transactionIndex);
          const calls = failed.get(block.number) ?? [];
          calls.push({
            txIndex,
            txHash: receipt.transactionHash,
            from: receipt.from,
            to,
            input: block.inputs?.[txIndex] ?? '0x',
          });
          failed.set(block.number, calls);
        }
      }
    }
    return { logs, failed };
  }

  const logsCall = (from: number, to: number) => ({
    method: 'eth_getLogs',
    params: [
      {
        fromBlock: toQuantity(from),
        toBlock: toQuantity(to),
        address: watched,
        // The events the derived tables are built from; the rest stays on the chain.
        topics: [TOPICS],
      },
    ],
  });

  /**
   * eth_getLogs in ranges the provider takes: a refused range shrinks, a node that is down or
   * busy is tried again at the same size, and the size grows back (see log-source.ts).
   */
  const logSource = createLogSource<RpcLog>({
    fetch: (from, to) => {
      const call = logsCall(from, to);
      return rpc.call<RpcLog[]>(call.method, call.params);
    },
    maxBlocks: MAX_BLOCKS_PER_STEP,
    stopped: () => closed,
  });

  /**
   * The highest indexed block at or below `top` that is still on the chain (the common
   * ancestor). With a finality depth, only the blocks above it are looked at: a chain that no
   * longer holds the indexed block that deep (at.number − finality) reorganised deeper than
   * the depth allows, which is reported (DeepReorgError), not walked back to wherever it
   * meets the index. On a dev chain (finality 0) any block may be replaced (evm_revert), and the
   * walk is bounded by the blocks the index holds.
   */
  async function commonAncestor(top: number): Promise<number> {
    const at = checkpoint();
    const floor = finality > 0 && at ? Math.max(0, at.number - finality) : 0;
    for (let upper = top; upper >= floor; upper -= 32) {
      const bottom = Math.max(floor, upper - 31);
      const chain = await headers(bottom, upper);
      for (let n = upper; n >= bottom; n--) {
        const ours = statements.hashAt.get(n) as { hash: Hash } | undefined;
        if (!ours) return n;
        if (ours.hash === chain[n - bottom]?.hash) return n;
      }
    }
    if (finality > 0 && at) throw new DeepReorgError(at.number, floor, finality);
    return -1;
  }

  /**
   * Cuts the raw data back to `ancestor` and derives every derived table again from the rest,
   * after `amend` (which may add raw rows, such as corrections) in the same transaction.
   */
  function rollBack(ancestor: number, amend?: () => void): void {
    db.exec('BEGIN');
    try {
      amend?.();
      db.prepare('DELETE FROM blocks WHERE number > ?').run(ancestor);
      db.prepare('DELETE FROM logs WHERE block_number > ?').run(ancestor);
      db.prepare('DELETE FROM failed_calls WHERE block_number > ?').run(ancestor);
      db.prepare('DELETE FROM vault_corrections WHERE block_number > ?').run(ancestor);
      for (const table of DERIVED_TABLES) db.exec(`DELETE FROM ${table}`);
      projection.reset();
      rederive();
      db.exec('COMMIT');
      version++;
      if (!failure) committed({ vaults: new Set(vaults.keys()), transactions: [], reorg: true });
    } catch (error) {
      rollBackQuietly();
      projection.reset();
      lastCheckpoint = undefined;
      throw error;
    }
  }

  /** Ends the open transaction; on a failed file SQLite may have ended it already. */
  function rollBackQuietly(): void {
    try {
      db.exec('ROLLBACK');
    } catch {
      // No transaction left to roll back: the error that brought us here is what matters.
    }
  }

  /** Applies every raw row kept, block by block, as the blocks were indexed. */
  function rederive(): void {
    const logs = db
      .prepare(
        'SELECT block_number, log_index, tx_hash, address, topic0, topic1, topic2, topic3, data FROM logs ORDER BY block_number, log_index',
      )
      .all() as Array<{
      block_number: number;
      log_index: number;
      tx_hash: string;
      address: string;
      topic0: Hex;
      topic1: Hex | null;
      topic2: Hex | null;
      topic3: Hex | null;
      data: Hex;
    }>;
    const failed = db
      .prepare(
        'SELECT block_number, tx_index, tx_hash, from_address, to_address, input FROM failed_calls ORDER BY block_number, tx_index',
      )
      .all() as Array<{
      block_number: number;
      tx_index: number;
      tx_hash: string;
      from_address: string;
      to_address: string;
      input: Hex;
    }>;
    const corrections = db
      .prepare(
        'SELECT block_number, vault, balance, reserved, total_supply, apy_bps, last_accrual FROM vault_corrections ORDER BY block_number, vault',
      )
      .all() as unknown as Array<StateRow & { block_number: number; vault: string }>;
    const byBlock = new Map<
      number,
      { logs: RawLog[]; failed: FailedCall[]; corrections: Array<[string, VaultState]> }
    >();
    const entry = (n: number) => {
      let found = byBlock.get(n);
      if (!found) {
        found = { logs: [], failed: [], corrections: [] };
        byBlock.set(n, found);
      }
      return found;
    };
    for (const row of corrections) {
      entry(Number(row.block_number)).corrections.push([row.vault, toState(row)]);
    }
    for (const row of logs) {
      entry(Number(row.block_number)).logs.push({
        address: row.address,
        topics: [row.topic0, row.topic1, row.topic2, row.topic3].filter(
          (topic): topic is Hex => topic !== null,
        ),
        data: row.data,
        logIndex: Number(row.log_index),
        txHash: row.tx_hash,
      });
    }
    for (const row of failed) {
      entry(Number(row.block_number)).failed.push({
        txIndex: Number(row.tx_index),
        txHash: row.tx_hash,
        from: row.from_address,
        to: row.to_address,
        input: row.input,
      });
    }
    const timestampAt = db.prepare('SELECT timestamp FROM blocks WHERE number = ?');
    for (const number of [...byBlock.keys()].sort((a, b) => a - b)) {
      const raw = byBlock.get(number) as NonNullable<ReturnType<typeof byBlock.get>>;
      const { timestamp } = timestampAt.get(number) as { timestamp: number };
      const block = { number, timestamp: Number(timestamp) };
      projection.applyBlock(block, raw.logs, raw.failed);
      for (const [vault, state] of raw.corrections) projection.correct(block, vault, state);
    }
  }

  /** Indexes blocks after the checkpoint up to `target`, one committed step at a time. */
  async function step(target: number): Promise<StepOutcome> {
    const at = checkpoint();
    const from = at ? at.number + 1 : (options.startBlock ?? 1);
    if (from > target) return 'done';
    const to = Math.min(target, from + MAX_BLOCKS_PER_STEP - 1);
    // One round trip for the blocks and their events: writes wait for it. On a dev chain
    // (finality 0) the events come from the blocks' receipts, which can be checked to be
    // complete and also show reverted calls; elsewhere from eth_getLogs, over blocks past the
    // finality depth. No state is read: the chain keeps none for old blocks (anvil prunes it,
    // a restored chain starts at its checkpoint), so everything is derived from events.
    const headerCount = to - from + 1;
    // The logs ride along with the headers when the provider takes the whole range at once;
    // otherwise they are read after, in as many calls as it needs.
    const logsAlong = !fromReceipts && headerCount <= logSource.blocksPerCall();
    const eventCalls = fromReceipts
      ? receiptCalls(from, to)
      : logsAlong
        ? [logsCall(from, to)]
        : [];
    const results = await rpc.batch([...headerCalls(from, to, fromReceipts), ...eventCalls]);
    const blocks = headersFrom(from, results.slice(0, headerCount));
    if (at && blocks[0]?.parentHash !== at.hash) {
      const ancestor = await commonAncestor(at.number);
      options.log.warn(
        `the chain reorganised below block ${at.number + 1}: the index goes back to block ${ancestor} and follows the new chain`,
      );
      rollBack(ancestor);
      return 'more';
    }
    for (let i = 1; i < blocks.length; i++) {
      if (blocks[i]?.parentHash !== blocks[i - 1]?.hash) return 'reread';
    }
    const eventResults = results.slice(headerCount);
    let found: RpcLog[];
    let failed = new Map<number, FailedCall[]>();
    if (fromReceipts) {
      const events = eventsFrom(blocks, eventResults);
      if (!events) return 'reread';
      found = events.logs;
      failed = events.failed;
    } else {
      const logsResult = eventResults[0];
      let all: RpcLog[];
      if (logsResult?.ok) {
        logSource.succeeded();
        all = logsResult.value as RpcLog[];
      } else {
        // A refused range shrinks before the range is read again in smaller calls.
        if (logsResult) logSource.failed(logsResult.error, headerCount);
        all = await logSource.read(from, to);
      }
      found = all.filter(isWatched);
    }
    const logs = found.filter((log) => !log.removed);
    const hashes = new Map(blocks.map((block) => [block.number, block.hash]));
    if (logs.some((log) => hashes.get(Number(log.blockNumber)) !== log.blockHash)) {
      return 'reread';
    }
    const logsOf = new Map<number, Array<RawLog & { txIndex: number }>>();
    for (const log of logs) {
      const n = Number(log.blockNumber);
      const list = logsOf.get(n) ?? [];
      list.push({
        address: log.address.toLowerCase(),
        topics: log.topics,
        data: log.data,
        logIndex: Number(log.logIndex),
        txHash: log.transactionHash,
        txIndex: Number(log.transactionIndex),
      });
      logsOf.set(n, list);
    }

    const changes: IndexCommit = { vaults: new Set(), transactions: [], reorg: false };
    db.exec('BEGIN');
    try {
      for (const block of blocks) {
        statements.block.run(block.number, block.hash, block.parentHash, block.timestamp);
        const blockLogs = (logsOf.get(block.number) ?? []).sort((a, b) => a.logIndex - b.logIndex);
        const blockFailed = failed.get(block.number) ?? [];
        for (const log of blockLogs) {
          statements.log.run(
            block.number,
            log.logIndex,
            block.hash,
            log.txIndex,
            log.txHash,
            log.address,
            log.topics[0] ?? null,
            log.topics[1] ?? null,
            log.topics[2] ?? null,
            log.topics[3] ?? null,
            log.data,
          );
        }
        for (const call of blockFailed) {
          statements.failed.run(
            block.number,
            call.txIndex,
            call.txHash,
            call.from,
            call.to,
            call.input,
          );
        }
        if (blockLogs.length > 0 || blockFailed.length > 0) {
          const changed: BlockChanges = projection.applyBlock(block, blockLogs, blockFailed);
          for (const vault of changed.vaults) changes.vaults.add(vault);
          changes.transactions.push(...changed.transactions);
        }
      }
      db.exec('COMMIT');
      version++;
      // A rebuild indexes old blocks again: nothing in them is news to a subscriber.
      if (!failure) committed(changes);
    } catch (error) {
      rollBackQuietly();
      // The cached vault states (and the last block) may hold what was rolled back.
      projection.reset();
      lastCheckpoint = undefined;
      throw error;
    }
    return to < target ? 'more' : 'done';
  }

  /**
   * What index.db holds that the chain, whose head is `head`, does not: the index is a witness
   * kept beside sandbox.db. Blocks past the chain's head are missing from it; so are the
   * transactions the index saw in blocks that the chain now has with other hashes, when the
   * chain's blocks of the same numbers lack them (a chain rebuilt after cheat methods keeps
   * every transaction under new hashes: it misses nothing). Undefined when nothing is missing.
   */
  async function missingFrom(head: {
    number: number;
    hash: Hash;
  }): Promise<{ indexedBlock: number; transactions: number } | undefined> {
    try {
      return await compareWith(head);
    } catch (error) {
      // A damaged index is no witness: it is rebuilt.
      if (!isIndexFileFailure(error)) throw error;
      fail(error);
      return undefined;
    }
  }

  async function compareWith(head: {
    number: number;
    hash: Hash;
  }): Promise<{ indexedBlock: number; transactions: number } | undefined> {
    const at = checkpoint();
    if (!at) return undefined;
    const seen = db.prepare(
      `SELECT block_number, tx_hash FROM logs WHERE block_number > ?
       UNION SELECT block_number, tx_hash FROM failed_calls WHERE block_number > ?`,
    );
    const witnessed = (above: number) =>
      seen.all(above, above) as Array<{ block_number: number; tx_hash: Hash }>;
    if (at.number > head.number) {
      const transactions = new Set(witnessed(head.number).map((row) => row.tx_hash)).size;
      return { indexedBlock: at.number, transactions };
    }
    const [onChain] = at.number === head.number ? [head] : await headers(at.number, at.number);
    if (onChain?.hash === at.hash) return undefined;
    const ancestor = await commonAncestor(at.number);
    const rows = witnessed(ancestor);
    const numbers = [...new Set(rows.map((row) => Number(row.block_number)))];
    const blocks = await rpc.batch(
      numbers.map((n) => ({ method: 'eth_getBlockByNumber', params: [toQuantity(n), false] })),
    );
    const txsAt = new Map(
      numbers.map((n, i) => {
        const block = blocks[i];
        if (!block?.ok) throw block?.error ?? new Error(`block ${n} is not available`);
        return [n, new Set(((block.value as RpcBlock | null)?.transactions ?? []) as Hash[])];
      }),
    );
    const lost = new Set(
      rows
        .filter((row) => !txsAt.get(Number(row.block_number))?.has(row.tx_hash))
        .map((row) => row.tx_hash),
    );
    return lost.size > 0 ? { indexedBlock: at.number, transactions: lost.size } : undefined;
  }

  /** Indexes up to `target` (default: the chain's head, less the finality depth). */
  function syncTo(target?: number): Promise<void> {
    return serially(async () => {
      if (closed) return;
      try {
        await indexUpTo(target);
      } catch (error) {
        // A damaged file, found by a step or by a rollback after a reorg: rebuilt.
        if (isIndexFileFailure(error)) fail(error);
        // Blocks the index took as final are gone: nothing it holds can be trusted, and the
        // chain is indexed again from the start.
        if (error instanceof DeepReorgError) fail(error, error.message);
        throw error;
      }
    });
  }

  /** syncTo's work: back to the chain after a reorg, then forward to `target`. */
  async function indexUpTo(target: number | undefined): Promise<void> {
    let goal = target;
    if (goal === undefined) {
      const head = await latestHead();
      await followBack(head);
      goal = head.number - finality;
    }
    if (options.ceiling) goal = Math.min(goal, options.ceiling());
    // One committed step at a time, until the goal; never a busy loop.
    for (let rereads = 0; !closed; ) {
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

  /**
   * Each vault's state on the chain at block `at`. Read it where no block is being made (the
   * checkpoint's exclusive section): anvil answers a read at its head's hash from the state of
   * the block it is mining meanwhile, not from the head's.
   */
  async function observe(at: { number: number; hash: Hash }): Promise<ChainObservation> {
    const blockTag = { blockHash: at.hash };
    // A synchronous vault holds nothing for others: it has no reservedAssets() to read.
    const reads = [...vaults].map(([vault, id]) => ({
      vault,
      calls: [
        readCall(usdc, 'balanceOf', [vault]),
        readCall(vault, 'totalSupply'),
        readCall(vault, 'apyBps'),
        readCall(vault, 'lastAccrual'),
        ...(VAULT_CONFIG[id].async ? [readCall(vault, 'reservedAssets')] : []),
      ],
    }));
    const results = await rpc.batch(
      reads.flatMap(({ calls }) =>
        calls.map((data) => ({ method: 'eth_call', params: [data, blockTag] })),
      ),
    );
    const states = new Map<string, VaultState>();
    let next = 0;
    for (const { vault, calls } of reads) {
      const values = calls.map(() => {
        const result = results[next++];
        if (!result?.ok) {
          throw new Error(
            `reading vault ${checksummed(vault)} at block ${at.number} failed: ${result?.error.message}`,
          );
        }
        return BigInt(result.value as Hex);
      });
      const [balance, totalSupply, apyBps, lastAccrual, reserved = 0n] = values as [
        bigint,
        bigint,
        bigint,
        bigint,
        bigint?,
      ];
      states.set(vault, { balance, reserved, totalSupply, apyBps, lastAccrual });
    }
    return { block: { number: at.number, hash: at.hash }, states };
  }

  /**
   * Compares each vault's indexed state after the observed block with the chain's there (see
   * observe), and where they differ (a change made outside transactions, such as
   * anvil_setStorageAt over the RPC URL: no event tells the index of it) records the chain's
   * as a correction at that block, logs which fields differed, and answers the vaults
   * corrected. An index that has moved past the block derives its tables again with the
   * correction; one that does not hold the block (not indexed yet, or since reorganised) is
   * left alone.
   */
  async function reconcile(observed: ChainObservation): Promise<string[]> {
    const corrected: string[] = [];
    await serially(async () => {
      // A failed index is being rebuilt from the chain, which holds the vaults' state anyway.
      if (closed || failure) return;
      try {
        await correctFrom(observed, corrected);
      } catch (error) {
        if (isIndexFileFailure(error)) throw new IndexUnavailableError(fail(error));
        throw error;
      }
    });
    return corrected;
  }

  async function correctFrom(observed: ChainObservation, corrected: string[]): Promise<void> {
    const at = checkpoint();
    const { number } = observed.block;
    const held = statements.hashAt.get(number) as { hash: Hash } | undefined;
    if (!at || held?.hash !== observed.block.hash) return;
    const timestamp = (statements.timestampAt.get(number) as { timestamp: number }).timestamp;
    const indexedAt = (vault: string): VaultState => {
      if (at.number === number) return projection.stateOf(vault);
      const row = statements.stateAtBlock.get(vault, number) as StateRow | undefined;
      return row
        ? toState(row)
        : { balance: 0n, reserved: 0n, totalSupply: 0n, apyBps: 0n, lastAccrual: 0n };
    };
    const differing = [...observed.states].flatMap(([vault, state]) => {
      const indexed = indexedAt(vault);
      const fields = (Object.keys(state) as Array<keyof VaultState>).filter(
        (field) => state[field] !== indexed[field],
      );
      return fields.length > 0 ? [{ vault, state, indexed, fields }] : [];
    });
    if (differing.length === 0) return;
    const record = () => {
      for (const { vault, state } of differing) {
        statements.correction.run(
          number,
          vault,
          state.balance.toString(),
          state.reserved.toString(),
          state.totalSupply.toString(),
          Number(state.apyBps),
          Number(state.lastAccrual),
        );
      }
    };
    if (at.number === number) {
      db.exec('BEGIN');
      try {
        record();
        for (const { vault, state } of differing)
          projection.correct({ number, timestamp }, vault, state);
        db.exec('COMMIT');
      } catch (error) {
        rollBackQuietly();
        projection.reset();
        throw error;
      }
      version++;
    } else {
      // The blocks indexed since then were derived from the uncorrected state.
      rollBack(at.number, record);
    }
    for (const { vault, state, indexed, fields } of differing) {
      const detail = fields
        .map((field) => `${field} ${indexed[field]} → ${state[field]}`)
        .join(', ');
      options.log.warn(
        `vault ${checksummed(vault)} at block ${number}: the index had tvl ${totalAssetsAt(indexed, timestamp)}, ` +
          `the chain ${totalAssetsAt(state, timestamp)} (raw USDC; ${detail}; changed outside transactions, as anvil_setStorageAt over the RPC URL does?); the index now holds the chain's`,
      );
      corrected.push(vault);
    }
    if (at.number === number) {
      committed({ vaults: new Set(corrected), transactions: [], reorg: false });
    }
  }

  return {
    /** index.db, for reads; run them through read(). Throws IndexUnavailableError while it has failed. */
    get db(): DatabaseSync {
      if (failure) throw new IndexUnavailableError(failure.reason);
      return db;
    },
    read,
    /** Why the index cannot answer (it failed and is being rebuilt), or undefined when it can. */
    failure: (): string | undefined => failure?.reason,
    vaults,
    syncTo,
    observe,
    reconcile,
    /** Rebuilds index.db from the chain now, if it has failed (the poll does it otherwise). */
    rebuild,
    /**
     * Writes a consistent copy of index.db, as indexed so far, to `path` (a new file), between
     * steps; false, writing nothing, while it has failed (it is being rebuilt).
     */
    copyTo(path: string): Promise<boolean> {
      let copied = false;
      return serially(async () => {
        if (failure) return;
        copyDatabase(db, path);
        copied = true;
      }).then(() => copied);
    },
    /**
     * Puts the copy at `from` (made by copyTo) in place of index.db, or an empty index.db when
     * undefined, between steps; the next step goes on from the copy's last block (or indexes
     * the chain from the start). Whatever was cached from the old one is stale (the version
     * moves); subscribers are not told (the caller closes them).
     */
    replaceWith(from: string | undefined): Promise<void> {
      return serially(async () => {
        try {
          db.close();
        } catch {
          // A failed file may not close cleanly; it is replaced next.
        }
        removeIndexFiles(options.path);
        if (from !== undefined) {
          copyFileSync(from, options.path);
          chmodSync(options.path, 0o600);
        }
        db = openIndexDatabase(options.path, identity, options.log.warn);
        projection = createProjection(db, projectionConfig);
        statements = prepare(db);
        lastCheckpoint = undefined;
        failure = undefined;
        version++;
      });
    },
    missingFrom,
    /**
     * Indexes up to `block` for a write about to be answered, and keeps how long that took
     * (waiting behind a poll included).
     */
    async syncForWrite(block?: number): Promise<void> {
      // A failed index is rebuilt in the background; a write does not wait for that.
      if (failure) return;
      const started = performance.now();
      try {
        await syncTo(block);
      } finally {
        waits[waitCount++ % WAIT_SAMPLES] = performance.now() - started;
      }
    },
    /** The writes' indexing waits: how many so far, and the median and p99 of the last ones. */
    waitStats(): { writes: number; p50Ms: number | null; p99Ms: number | null } {
      const sorted = waits.slice(0, Math.min(waitCount, WAIT_SAMPLES)).sort((a, b) => a - b);
      const at = (p: number) =>
        sorted.length === 0
          ? null
          : Math.round(
              (sorted[
                Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))
              ] as number) * 100,
            ) / 100;
      return { writes: waitCount, p50Ms: at(50), p99Ms: at(99) };
    },
    /**
     * Calls `listener` after each commit with what it changed; answers the unsubscribe. A
     * listener runs synchronously inside the indexer's step: it must only schedule work.
     */
    onCommit(listener: (changes: IndexCommit) => void): () => void {
      commitListeners.add(listener);
      return () => commitListeners.delete(listener);
    },
    /** A value that changes whenever the index commits anything. */
    version: () => version,
    /** The last indexed block; undefined while the index has failed. */
    checkpoint(): Checkpoint | undefined {
      if (failure) return undefined;
      try {
        return checkpoint();
      } catch (error) {
        if (!isIndexFileFailure(error)) throw error;
        fail(error);
        return undefined;
      }
    },
    /** Follows the chain in the background. */
    start(): void {
      let failures = 0;
      const tick = () => {
        // After failures the poll backs off, so that one that lasts is not retried (and
        // logged) five times a second for ever.
        const delay = Math.min(INDEX_RETRY_MAX_MS, INDEX_POLL_MS * 2 ** failures);
        timer = setTimeout(() => {
          if (options.paused?.()) {
            tick();
            return;
          }
          // Named before the work: a sync that fails the index was indexing, not rebuilding.
          const work = failure ? 'rebuilding index.db' : 'indexing';
          (failure ? rebuild() : syncTo()).then(
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
    },
    async close(): Promise<void> {
      if (closed) return;
      closed = true;
      clearTimeout(timer);
      await running;
      try {
        db.close();
      } catch {
        // Closed already by a rebuild that could not finish.
      }
    },
  };
}
export type Indexer = ReturnType<typeof createIndexer>;

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

/** An eth_call's transaction object for a view of the sandbox's contracts, without arguments or with addresses. */
function readCall(to: string, functionName: string, args: string[] = []) {
  return {
    to,
    data: encodeFunctionData({
      abi: VIEWS_ABI,
      functionName,
      args,
    } as Parameters<typeof encodeFunctionData>[0]),
  };
}

/** The views a vault's state is read back with (SandboxVault's, ConfigurableVault's, MockUSDC's). */
const VIEWS_ABI = parseAbi([
  'function balanceOf(address) view returns (uint256)',
  'function reservedAssets() view returns (uint256)',
  'function totalSupply() view returns (uint256)',
  'function apyBps() view returns (uint256)',
  'function lastAccrual() view returns (uint256)',
]);

function range(from: number, to: number): number[] {
  return Array.from({ length: to - from + 1 }, (_, i) => from + i);
}

/** A vault's address in its EIP-55 form, as the API answers it. */
export function checksummed(address: string): Address {
  return getAddress(address);
}
