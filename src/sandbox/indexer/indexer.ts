import type { DatabaseSync } from 'node:sqlite';
import {
  type Address,
  decodeEventLog,
  encodeEventTopics,
  encodeFunctionData,
  getAddress,
  type Hash,
  type Hex,
} from 'viem';
import { VAULT_IDS } from '../../api/schemas/values.ts';
import { SandboxVault } from '../chain/contracts/artifacts.ts';
import type { Deployment } from '../chain/deployment.ts';
import { type RpcBlock, type RpcClient, type RpcResult, toQuantity } from '../chain/rpc.ts';
import { DERIVED_BY_BLOCK, openIndexDatabase } from './schema.ts';

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
  log: { warn(message: string): void };
}

/** At most this many blocks are read and committed at once. */
const MAX_BLOCKS_PER_STEP = 500;
/** How often the chain's head is looked at, for activity that did not come through us. */
export const INDEX_POLL_MS = 200;
/** A range that reads inconsistently (the chain moved while it was read) is read again… */
const REREADS = 3;
/** …after this pause, and then the sync fails and the poll tries again later. */
const REREAD_PAUSE_MS = 50;

type StepOutcome = 'done' | 'more' | 'reread';

const vaultAbi = SandboxVault.abi;
const TOPICS = {
  transfer: encodeEventTopics({ abi: vaultAbi, eventName: 'Transfer' })[0] as Hex,
  deposit: encodeEventTopics({ abi: vaultAbi, eventName: 'Deposit' })[0] as Hex,
  withdraw: encodeEventTopics({ abi: vaultAbi, eventName: 'Withdraw' })[0] as Hex,
};
const CALLS = {
  totalAssets: encodeFunctionData({ abi: vaultAbi, functionName: 'totalAssets' }),
  totalSupply: encodeFunctionData({ abi: vaultAbi, functionName: 'totalSupply' }),
};
type VaultId = (typeof VAULT_IDS)[number];
const ZERO_ADDRESS = '0x0000000000000000000000000000000000000000';

interface RpcReceipt {
  blockHash: Hash;
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
}

/**
 * Follows the chain into index.db. `syncTo(n)` indexes up to block n and resolves once it is
 * committed: the write path awaits it before answering, so a client reads its own write from
 * /v1 at once. A poll picks up everything else (someone calling a vault over the RPC URL)
 * within INDEX_POLL_MS. Each step compares the next block's parentHash with the checkpoint;
 * on a mismatch it finds the common ancestor, cuts every table back to it and indexes again.
 */
export function createIndexer(options: IndexerOptions) {
  const { rpc, deployment } = options;
  const vaults = new Map<string, VaultId>(
    VAULT_IDS.map((id) => [deployment.vaults[id].toLowerCase(), id]),
  );
  const watched = [...vaults.keys()] as Address[];
  const identity = JSON.stringify({ chainId: options.chainId, vaults: watched });
  const db: DatabaseSync = openIndexDatabase(options.path, identity);
  const finality = options.finalityDepth ?? 0;
  let running: Promise<void> = Promise.resolve();
  let closed = false;
  let timer: NodeJS.Timeout | undefined;
  let logsPerCall = Number.POSITIVE_INFINITY;

  const statements = {
    checkpoint: db.prepare('SELECT number, hash FROM blocks ORDER BY number DESC LIMIT 1'),
    hashAt: db.prepare('SELECT hash FROM blocks WHERE number = ?'),
    block: db.prepare(
      'INSERT INTO blocks (number, hash, parent_hash, timestamp) VALUES (?, ?, ?, ?)',
    ),
    log: db.prepare(
      `INSERT INTO logs (block_number, log_index, block_hash, tx_index, tx_hash, address, topic0, topic1, topic2, topic3, data)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    ),
    transaction: db.prepare(
      `INSERT INTO transactions (block_number, log_index, hash, type, vault, user_address, amount, shares, status, timestamp)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    ),
    position: db.prepare(
      'SELECT shares, net_deposited, deposited_at FROM positions WHERE user_address = ? AND vault = ?',
    ),
    upsertPosition: db.prepare(
      `INSERT INTO positions (user_address, vault, shares, net_deposited, deposited_at) VALUES (?, ?, ?, ?, ?)
       ON CONFLICT (user_address, vault) DO UPDATE SET shares = excluded.shares,
         net_deposited = excluded.net_deposited, deposited_at = excluded.deposited_at`,
    ),
    snapshot: db.prepare(
      `INSERT INTO vault_snapshots (vault, block_number, timestamp, total_assets, total_supply) VALUES (?, ?, ?, ?, ?)
       ON CONFLICT (vault, block_number) DO UPDATE SET total_assets = excluded.total_assets, total_supply = excluded.total_supply`,
    ),
  };

  function checkpoint(): { number: number; hash: Hash } | undefined {
    const row = statements.checkpoint.get() as { number: number; hash: Hash } | undefined;
    return row && { number: Number(row.number), hash: row.hash };
  }

  /** Serialises every step: one writer, in order. */
  function serially(work: () => Promise<void>): Promise<void> {
    const next = running.then(work, work);
    running = next.catch(() => undefined);
    return next;
  }

  async function latestBlock(): Promise<number> {
    return Number(await rpc.call<Hex>('eth_blockNumber'));
  }

  const headerCalls = (from: number, to: number) =>
    range(from, to).map((n) => ({
      method: 'eth_getBlockByNumber',
      params: [toQuantity(n), false],
    }));

  async function headers(from: number, to: number): Promise<Header[]> {
    return headersFrom(from, await rpc.batch(headerCalls(from, to)));
  }

  function headersFrom(from: number, results: RpcResult[]): Header[] {
    return results.map((result, i) => {
      const block = (result.ok ? result.value : undefined) as RpcBlock | undefined;
      if (!block) throw new Error(`block ${from + i} is not available`);
      return {
        number: Number(block.number),
        hash: block.hash,
        parentHash: block.parentHash,
        timestamp: Number(block.timestamp),
        transactionCount: block.transactions.length,
      };
    });
  }

  const receiptCalls = (from: number, to: number) =>
    range(from, to).map((n) => ({ method: 'eth_getBlockReceipts', params: [toQuantity(n)] }));

  /**
   * The watched events of each block, from its receipts; undefined when a block's receipts are
   * not all there yet (anvil answers a new block's header a moment before its receipts and
   * logs, and eth_getLogs then answers nothing for it, which could not be told from no events).
   */
  function eventsFrom(blocks: Header[], results: RpcResult[]): RpcLog[] | undefined {
    const topics = new Set<string>(Object.values(TOPICS));
    const addresses = new Set(watched.map((vault) => vault.toLowerCase()));
    const logs: RpcLog[] = [];
    for (const [i, block] of blocks.entries()) {
      const result = results[i];
      const receipts = (result?.ok ? result.value : undefined) as RpcReceipt[] | null | undefined;
      if (!receipts || receipts.length !== block.transactionCount) return undefined;
      for (const receipt of receipts) {
        if (receipt.blockHash !== block.hash) return undefined;
        for (const log of receipt.logs) {
          if (addresses.has(log.address.toLowerCase()) && topics.has(log.topics[0] ?? '')) {
            logs.push(log);
          }
        }
      }
    }
    return logs;
  }

  const logsCall = (from: number, to: number) => ({
    method: 'eth_getLogs',
    params: [
      {
        fromBlock: toQuantity(from),
        toBlock: toQuantity(to),
        address: watched,
        // The events the derived tables are built from; the rest stays on the chain.
        topics: [Object.values(TOPICS)],
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

  /** Cuts every table back to `ancestor`, positions recomputed from what remains. */
  function rollBack(ancestor: number): void {
    db.exec('BEGIN');
    try {
      db.prepare('DELETE FROM blocks WHERE number > ?').run(ancestor);
      db.prepare('DELETE FROM logs WHERE block_number > ?').run(ancestor);
      for (const table of DERIVED_BY_BLOCK) {
        db.prepare(`DELETE FROM ${table} WHERE block_number > ?`).run(ancestor);
      }
      rebuildPositions();
      db.exec('COMMIT');
    } catch (error) {
      db.exec('ROLLBACK');
      throw error;
    }
  }

  /** Positions from the logs kept (after a reorg): balances from share transfers. */
  function rebuildPositions(): void {
    db.exec('DELETE FROM positions');
    const rows = db
      .prepare(
        'SELECT block_number, log_index, address, topic0, topic1, topic2, topic3, data, tx_hash FROM logs ORDER BY block_number, log_index',
      )
      .all() as Array<{
      block_number: number;
      log_index: number;
      address: string;
      topic0: Hex;
      topic1: Hex | null;
      topic2: Hex | null;
      topic3: Hex | null;
      data: Hex;
      tx_hash: Hash;
    }>;
    const timestamps = new Map<number, number>();
    for (const row of rows) {
      let timestamp = timestamps.get(Number(row.block_number));
      if (timestamp === undefined) {
        timestamp = Number(
          (
            db.prepare('SELECT timestamp FROM blocks WHERE number = ?').get(row.block_number) as {
              timestamp: number;
            }
          ).timestamp,
        );
        timestamps.set(Number(row.block_number), timestamp);
      }
      applyToPositions(
        {
          address: row.address as Address,
          topics: [row.topic0, row.topic1, row.topic2, row.topic3].filter(
            (topic): topic is Hex => topic !== null,
          ),
          data: row.data,
        },
        timestamp,
      );
    }
  }

  function addToPosition(
    user: string,
    vault: string,
    change: { shares?: bigint; deposited?: bigint },
    timestamp: number,
  ): void {
    const row = statements.position.get(user, vault) as
      | { shares: string; net_deposited: string; deposited_at: number | null }
      | undefined;
    const shares = BigInt(row?.shares ?? '0') + (change.shares ?? 0n);
    const deposited = BigInt(row?.net_deposited ?? '0') + (change.deposited ?? 0n);
    const depositedAt =
      row?.deposited_at ??
      (change.deposited !== undefined && change.deposited > 0n ? timestamp : null);
    statements.upsertPosition.run(
      user,
      vault,
      shares.toString(),
      deposited.toString(),
      depositedAt,
    );
  }

  /** Share balances from Transfer (mint and burn included), net deposits from Deposit/Withdraw. */
  function applyToPositions(
    log: { address: Address; topics: Hex[]; data: Hex },
    timestamp: number,
  ) {
    const vault = log.address.toLowerCase();
    if (!vaults.has(vault)) return undefined;
    const event = decodeEventLog({
      abi: vaultAbi,
      data: log.data,
      topics: log.topics as [Hex, ...Hex[]],
      strict: false,
    });
    switch (event.eventName) {
      case 'Transfer': {
        const { from, to, value } = event.args as { from: Address; to: Address; value: bigint };
        if (from !== ZERO_ADDRESS)
          addToPosition(from.toLowerCase(), vault, { shares: -value }, timestamp);
        if (to !== ZERO_ADDRESS)
          addToPosition(to.toLowerCase(), vault, { shares: value }, timestamp);
        return event;
      }
      case 'Deposit': {
        const { owner, assets } = event.args as { owner: Address; assets: bigint };
        addToPosition(owner.toLowerCase(), vault, { deposited: assets }, timestamp);
        return event;
      }
      case 'Withdraw': {
        const { owner, assets } = event.args as { owner: Address; assets: bigint };
        addToPosition(owner.toLowerCase(), vault, { deposited: -assets }, timestamp);
        return event;
      }
      default:
        return event;
    }
  }

  /** Each vault's totalAssets() and totalSupply() at `block`, in one batch. */
  const snapshotCalls = (block: number, which: string[]) =>
    which.flatMap((vault) =>
      [CALLS.totalAssets, CALLS.totalSupply].map((data) => ({
        method: 'eth_call',
        params: [{ to: vault, data }, toQuantity(block)],
      })),
    );

  function snapshotsFrom(block: number, which: string[], results: RpcResult[]) {
    return which.map((vault, i) => {
      const assets = results[2 * i];
      const supply = results[2 * i + 1];
      if (!assets?.ok || !supply?.ok)
        throw new Error(`cannot read vault ${vault} at block ${block}`);
      return {
        vault,
        totalAssets: BigInt(assets.value as Hex),
        totalSupply: BigInt(supply.value as Hex),
      };
    });
  }

  /** Indexes blocks after the checkpoint up to `target`, one committed step at a time. */
  async function step(target: number): Promise<StepOutcome> {
    const at = checkpoint();
    const from = at ? at.number + 1 : (options.startBlock ?? 1);
    if (from > target) return 'done';
    const to = Math.min(target, from + MAX_BLOCKS_PER_STEP - 1);
    // Every vault's state at the goal of this sync, its head: the chain keeps no state for
    // old blocks (anvil prunes it, and a restored chain starts at its checkpoint), so a
    // rebuild could not read them. History is derived from events instead (next: /history).
    const snapshotVaults = to === target ? watched.map((vault) => vault.toLowerCase()) : [];
    // One round trip for the headers, the logs and the vaults' state: writes wait for it.
    const headerCount = to - from + 1;
    // On a dev chain (finality 0) the events come from the blocks' receipts, which can be
    // checked to be complete; elsewhere from eth_getLogs, over blocks past the finality depth.
    const fromReceipts = finality === 0;
    const eventCalls = fromReceipts ? receiptCalls(from, to) : [logsCall(from, to)];
    const results = await rpc.batch([
      ...headerCalls(from, to),
      ...eventCalls,
      ...snapshotCalls(to, snapshotVaults),
    ]);
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
    const eventResults = results.slice(headerCount, headerCount + eventCalls.length);
    let found: RpcLog[] | undefined;
    if (fromReceipts) {
      found = eventsFrom(blocks, eventResults);
      if (!found) return 'reread';
    } else {
      const logsResult = eventResults[0];
      // A provider that refuses the range is asked again in smaller ranges.
      found = logsResult?.ok ? (logsResult.value as RpcLog[]) : await logsIn(from, to);
    }
    const logs = found.filter((log) => !log.removed);
    const hashes = new Map(blocks.map((block) => [block.number, block.hash]));
    if (logs.some((log) => hashes.get(Number(log.blockNumber)) !== log.blockHash)) {
      return 'reread';
    }
    const snapshots =
      snapshotVaults.length > 0
        ? [
            {
              block: to,
              rows: snapshotsFrom(
                to,
                snapshotVaults,
                results.slice(headerCount + eventCalls.length),
              ),
            },
          ]
        : [];

    const timestampOf = new Map(blocks.map((block) => [block.number, block.timestamp]));
    db.exec('BEGIN');
    try {
      for (const block of blocks) {
        statements.block.run(block.number, block.hash, block.parentHash, block.timestamp);
      }
      for (const log of logs) {
        const blockNumber = Number(log.blockNumber);
        const logIndex = Number(log.logIndex);
        const timestamp = timestampOf.get(blockNumber) as number;
        statements.log.run(
          blockNumber,
          logIndex,
          log.blockHash,
          Number(log.transactionIndex),
          log.transactionHash,
          log.address.toLowerCase(),
          log.topics[0] ?? null,
          log.topics[1] ?? null,
          log.topics[2] ?? null,
          log.topics[3] ?? null,
          log.data,
        );
        const event = applyToPositions(log, timestamp);
        if (event?.eventName === 'Deposit' || event?.eventName === 'Withdraw') {
          const args = event.args as { owner: Address; assets: bigint; shares: bigint };
          statements.transaction.run(
            blockNumber,
            logIndex,
            log.transactionHash,
            event.eventName === 'Deposit' ? 'deposit' : 'withdraw',
            log.address.toLowerCase(),
            args.owner.toLowerCase(),
            args.assets.toString(),
            args.shares.toString(),
            // A synchronous vault's deposit or withdrawal is done in its block.
            'fulfilled',
            timestamp,
          );
        }
      }
      for (const { block, rows } of snapshots) {
        for (const row of rows) {
          statements.snapshot.run(
            row.vault,
            block,
            timestampOf.get(block) as number,
            row.totalAssets.toString(),
            row.totalSupply.toString(),
          );
        }
      }
      db.exec('COMMIT');
    } catch (error) {
      db.exec('ROLLBACK');
      throw error;
    }
    return to < target ? 'more' : 'done';
  }

  /** Indexes up to `target` (default: the chain's head, less the finality depth). */
  function syncTo(target?: number): Promise<void> {
    return serially(async () => {
      if (closed) return;
      const goal = target ?? (await latestBlock()) - finality;
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
    /** The last indexed block. */
    checkpoint,
    /** Follows the chain in the background. */
    start(): void {
      const tick = () => {
        timer = setTimeout(() => {
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
