import type { DatabaseSync } from 'node:sqlite';
import { type Address, getAddress, type Hash, type Hex, pad, toEventSelector } from 'viem';
import { VAULT_IDS } from '../../api/schemas/values.ts';
import { type Deployment, VAULT_CONFIG } from '../chain/deployment.ts';
import { type RpcBlock, type RpcClient, type RpcResult, toQuantity } from '../chain/rpc.ts';
import {
  type BlockChanges,
  createProjection,
  EVENTS_ABI,
  type FailedCall,
  type RawLog,
} from './projection.ts';
import { DERIVED_TABLES, openIndexDatabase } from './schema.ts';

export interface IndexerOptions {
  /** index.db in the state dir. */
  path: string;
  rpc: RpcClient;
  chainId: number;
  deployment: Deployment;
  /** Blocks this deep are final (0 on the sandbox's own chain). */
  finalityDepth?: number;
  /**
   * The first block worth reading: the deployment's, on a chain with history before it.
   * Default 1: block 0 is the genesis, and a chain restored from a checkpoint may answer a
   * block 0 that is not the parent of its block 1.
   */
  startBlock?: number;
  /**
   * The highest block that may be indexed (on the sandbox's own chain, the last logged one:
   * a rebuild brings back every logged block, so the index is never ahead of a rebuilt chain).
   */
  ceiling?: () => number;
  /** True while the chain cannot be read (it is being rebuilt): the background poll waits. */
  paused?: () => boolean;
  log: { warn(message: string): void };
}

/** At most this many blocks are read and committed at once. */
const MAX_BLOCKS_PER_STEP = 500;
/** Writes whose indexing wait is kept, for /sandbox/info and the benchmark. */
const WAIT_SAMPLES = 1024;
/** How often the chain's head is looked at, for activity that did not come through us. */
export const INDEX_POLL_MS = 200;
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
  const db: DatabaseSync = openIndexDatabase(options.path, identity);
  const projection = createProjection(db, {
    usdc,
    registry,
    vaults: new Map(
      [...vaults].map(([address, id]) => [address, { async: VAULT_CONFIG[id].async }]),
    ),
  });
  const finality = options.finalityDepth ?? 0;
  // On a dev chain, blocks are read whole and events come from receipts (see step()).
  const fromReceipts = finality === 0;
  let running: Promise<void> = Promise.resolve();
  let closed = false;
  let timer: NodeJS.Timeout | undefined;
  let logsPerCall = Number.POSITIVE_INFINITY;
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

  const statements = {
    checkpoint: db.prepare(
      'SELECT number, hash, timestamp FROM blocks ORDER BY number DESC LIMIT 1',
    ),
    hashAt: db.prepare('SELECT hash FROM blocks WHERE number = ?'),
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
  };

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

  /** eth_getLogs over [from, to], split in halves while the provider refuses the range. */
  async function logsIn(from: number, to: number): Promise<RpcLog[]> {
    if (to - from + 1 > logsPerCall) {
      const middle = from + Math.floor((to - from) / 2);
      return [...(await logsIn(from, middle)), ...(await logsIn(middle + 1, to))];
    }
    try {
      const call = logsCall(from, to);
      return await rpc.call<RpcLog[]>(call.method, call.params);
    } catch (error) {
      if (from === to) throw error;
      // "query returned more than N results", "block range too large": ask for less.
      logsPerCall = Math.max(1, Math.floor((to - from + 1) / 2));
      return logsIn(from, to);
    }
  }

  /** The highest indexed block that is still on the chain (the common ancestor). */
  async function commonAncestor(below: number): Promise<number> {
    for (let top = below; top >= 0; top -= 32) {
      const bottom = Math.max(0, top - 31);
      const chain = await headers(bottom, top);
      for (let n = top; n >= bottom; n--) {
        const ours = statements.hashAt.get(n) as { hash: Hash } | undefined;
        if (!ours) return n;
        if (ours.hash === chain[n - bottom]?.hash) return n;
      }
    }
    return -1;
  }

  /** Cuts the raw data back to `ancestor` and derives every derived table again from the rest. */
  function rollBack(ancestor: number): void {
    db.exec('BEGIN');
    try {
      db.prepare('DELETE FROM blocks WHERE number > ?').run(ancestor);
      db.prepare('DELETE FROM logs WHERE block_number > ?').run(ancestor);
      db.prepare('DELETE FROM failed_calls WHERE block_number > ?').run(ancestor);
      for (const table of DERIVED_TABLES) db.exec(`DELETE FROM ${table}`);
      projection.reset();
      rederive();
      db.exec('COMMIT');
      version++;
      committed({ vaults: new Set(vaults.keys()), transactions: [], reorg: true });
    } catch (error) {
      db.exec('ROLLBACK');
      projection.reset();
      lastCheckpoint = undefined;
      throw error;
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
    const byBlock = new Map<number, { logs: RawLog[]; failed: FailedCall[] }>();
    const entry = (n: number) => {
      let found = byBlock.get(n);
      if (!found) {
        found = { logs: [], failed: [] };
        byBlock.set(n, found);
      }
      return found;
    };
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
      const raw = byBlock.get(number) as { logs: RawLog[]; failed: FailedCall[] };
      const { timestamp } = timestampAt.get(number) as { timestamp: number };
      projection.applyBlock({ number, timestamp: Number(timestamp) }, raw.logs, raw.failed);
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
    const eventCalls = fromReceipts ? receiptCalls(from, to) : [logsCall(from, to)];
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
      // A provider that refuses the range is asked again in smaller ranges.
      const all = logsResult?.ok ? (logsResult.value as RpcLog[]) : await logsIn(from, to);
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
      committed(changes);
    } catch (error) {
      db.exec('ROLLBACK');
      // The cached vault states (and the last block) may hold what was rolled back.
      projection.reset();
      lastCheckpoint = undefined;
      throw error;
    }
    return to < target ? 'more' : 'done';
  }

  /** Indexes up to `target` (default: the chain's head, less the finality depth). */
  function syncTo(target?: number): Promise<void> {
    return serially(async () => {
      if (closed) return;
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
    });
  }

  return {
    db,
    vaults,
    syncTo,
    /**
     * Indexes up to `block` for a write about to be answered, and keeps how long that took
     * (waiting behind a poll included).
     */
    async syncForWrite(block?: number): Promise<void> {
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
    /** The last indexed block. */
    checkpoint,
    /** Follows the chain in the background. */
    start(): void {
      const tick = () => {
        timer = setTimeout(() => {
          if (options.paused?.()) {
            tick();
            return;
          }
          syncTo().then(tick, (error: unknown) => {
            options.log.warn(`indexing failed: ${(error as Error).message}; trying again`);
            tick();
          });
        }, INDEX_POLL_MS);
        timer.unref();
      };
      tick();
    },
    async close(): Promise<void> {
      if (closed) return;
      closed = true;
      clearTimeout(timer);
      await running;
      db.close();
    },
  };
}
export type Indexer = ReturnType<typeof createIndexer>;

function range(from: number, to: number): number[] {
  return Array.from({ length: to - from + 1 }, (_, i) => from + i);
}

/** A vault's address in its EIP-55 form, as the API answers it. */
export function checksummed(address: string): Address {
  return getAddress(address);
}
