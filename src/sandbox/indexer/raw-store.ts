import type { Hash, Hex } from 'viem';
import type { Sql, SqlValue } from '../store/sql.ts';
import {
  type FailedCall,
  type RawLog,
  type StateRow,
  toState,
  type VaultState,
} from './projection.ts';
import { DERIVED_TABLES } from './schema.ts';
import type { Header, SourcedLog } from './source.ts';
import { insertRows } from './statements.ts';

/**
 * The index's raw side: the blocks, logs, reverted vault calls and corrections as read from the
 * chain, kept apart from the tables derived from them (projection.ts), so that a reorg or a
 * correction is "cut the raw rows back and derive again". Statements only, on the Sql given:
 * a step's transaction for writes, committed rows (or the transaction) for reads. Where the
 * rows are kept (index.db, PostgreSQL) is storage.ts's.
 */

/** One block's raw rows, as the derived tables are built from them. */
export interface RawBlock {
  number: number;
  timestamp: number;
  logs: RawLog[];
  failed: FailedCall[];
  corrections: Array<[string, VaultState]>;
}

/** One block read from the chain, with its watched logs and reverted vault calls. */
export interface SourcedBlock {
  block: Header;
  logs: SourcedLog[];
  failed: FailedCall[];
}

/** The last block held. */
export async function headBlock(
  sql: Sql,
): Promise<{ number: number; hash: Hash; timestamp: number } | undefined> {
  const row = await sql.get<{ number: number; hash: Hash; timestamp: number }>(
    'SELECT number, hash, timestamp FROM blocks ORDER BY number DESC LIMIT 1',
  );
  return row && { number: Number(row.number), hash: row.hash, timestamp: Number(row.timestamp) };
}

export async function hashAt(sql: Sql, number: number): Promise<Hash | undefined> {
  return (await sql.get<{ hash: Hash }>('SELECT hash FROM blocks WHERE number = ?', number))?.hash;
}

/** The hashes of the blocks held from `from` to `to`, by number (one read for the range). */
export async function hashesBetween(
  sql: Sql,
  from: number,
  to: number,
): Promise<Map<number, Hash>> {
  const rows = await sql.all<{ number: number; hash: Hash }>(
    'SELECT number, hash FROM blocks WHERE number >= ? AND number <= ?',
    from,
    to,
  );
  return new Map(rows.map((row) => [Number(row.number), row.hash]));
}

export async function timestampAt(sql: Sql, number: number): Promise<number> {
  const row = await sql.get<{ timestamp: number }>(
    'SELECT timestamp FROM blocks WHERE number = ?',
    number,
  );
  if (!row) throw new Error(`the index holds no block ${number}`);
  return Number(row.timestamp);
}

/** A vault's derived state after block `number` (the last one at or before it). */
export async function stateAtBlock(
  sql: Sql,
  vault: string,
  number: number,
): Promise<VaultState | undefined> {
  const row = await sql.get<StateRow>(
    `SELECT balance, reserved, total_supply, apy_bps, last_accrual FROM vault_states
     WHERE vault = ? AND block_number <= ? ORDER BY block_number DESC LIMIT 1`,
    vault,
    number,
  );
  return row && toState(row);
}

/** Writes the raw rows of a step's blocks (inside its transaction), a few statements in all. */
export async function addBlocks(tx: Sql, blocks: SourcedBlock[]): Promise<void> {
  await insertRows(
    tx,
    'INSERT INTO blocks (number, hash, parent_hash, timestamp) VALUES',
    blocks.map(({ block }) => [block.number, block.hash, block.parentHash, block.timestamp]),
  );
  const logs: SqlValue[][] = [];
  const failed: SqlValue[][] = [];
  for (const { block, logs: blockLogs, failed: blockFailed } of blocks) {
    for (const log of blockLogs) {
      logs.push([
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
        log.input ?? null,
      ]);
    }
    for (const call of blockFailed) {
      failed.push([block.number, call.txIndex, call.txHash, call.from, call.to, call.input]);
    }
  }
  await insertRows(
    tx,
    `INSERT INTO logs (block_number, log_index, block_hash, tx_index, tx_hash, address, topic0, topic1, topic2, topic3, data, tx_input)
     VALUES`,
    logs,
  );
  await insertRows(
    tx,
    'INSERT INTO failed_calls (block_number, tx_index, tx_hash, from_address, to_address, input) VALUES',
    failed,
  );
}

/**
 * Records accounts' ETH after blocks (inside a step's or a correction's transaction): by block
 * number, each account's balance then.
 */
export async function addEthBalances(
  tx: Sql,
  balances: Map<number, Map<string, bigint>>,
): Promise<void> {
  const rows: SqlValue[][] = [];
  for (const [number, accounts] of balances) {
    for (const [account, balance] of accounts) rows.push([account, number, balance.toString()]);
  }
  await insertRows(
    tx,
    'INSERT INTO eth_balances (address, block_number, balance) VALUES',
    rows,
    'ON CONFLICT (address, block_number) DO UPDATE SET balance = excluded.balance',
  );
}

/** An account's ETH after block `number` (the last reading at or before it), if any. */
export async function ethBalanceAt(
  sql: Sql,
  account: string,
  number: number,
): Promise<bigint | undefined> {
  const row = await sql.get<{ balance: string }>(
    `SELECT balance FROM eth_balances WHERE address = ? AND block_number <= ?
     ORDER BY block_number DESC LIMIT 1`,
    account,
    number,
  );
  return row && BigInt(row.balance);
}

/** Records the chain's state of a vault after block `number`, which no event told of. */
export async function addCorrection(
  tx: Sql,
  number: number,
  vault: string,
  state: VaultState,
): Promise<void> {
  await tx.run(
    `INSERT INTO vault_corrections (block_number, vault, balance, reserved, total_supply, apy_bps, last_accrual)
     VALUES (?, ?, ?, ?, ?, ?, ?)
     ON CONFLICT (block_number, vault) DO UPDATE SET balance = excluded.balance,
       reserved = excluded.reserved, total_supply = excluded.total_supply,
       apy_bps = excluded.apy_bps, last_accrual = excluded.last_accrual`,
    number,
    vault,
    state.balance.toString(),
    state.reserved.toString(),
    state.totalSupply.toString(),
    Number(state.apyBps),
    Number(state.lastAccrual),
  );
}

/**
 * Cuts the raw rows back to block `ancestor` and empties the derived tables, which are then
 * derived again from what remains (inside the caller's transaction).
 */
export async function cutBackTo(tx: Sql, ancestor: number): Promise<void> {
  await tx.run('DELETE FROM blocks WHERE number > ?', ancestor);
  await tx.run('DELETE FROM logs WHERE block_number > ?', ancestor);
  await tx.run('DELETE FROM failed_calls WHERE block_number > ?', ancestor);
  await tx.run('DELETE FROM vault_corrections WHERE block_number > ?', ancestor);
  await tx.run('DELETE FROM eth_balances WHERE block_number > ?', ancestor);
  for (const table of DERIVED_TABLES) await tx.run(`DELETE FROM ${table}`);
}

/** Every raw row kept, by block, in block order: what the derived tables are built from. */
export async function rawBlocks(sql: Sql): Promise<RawBlock[]> {
  const logs = await sql.all<{
    block_number: number;
    log_index: number;
    tx_hash: string;
    address: string;
    topic0: Hex;
    topic1: Hex | null;
    topic2: Hex | null;
    topic3: Hex | null;
    data: Hex;
    tx_input: Hex | null;
  }>(
    'SELECT block_number, log_index, tx_hash, address, topic0, topic1, topic2, topic3, data, tx_input FROM logs ORDER BY block_number, log_index',
  );
  const failed = await sql.all<{
    block_number: number;
    tx_index: number;
    tx_hash: string;
    from_address: string;
    to_address: string;
    input: Hex;
  }>(
    'SELECT block_number, tx_index, tx_hash, from_address, to_address, input FROM failed_calls ORDER BY block_number, tx_index',
  );
  const corrections = await sql.all<StateRow & { block_number: number; vault: string }>(
    'SELECT block_number, vault, balance, reserved, total_supply, apy_bps, last_accrual FROM vault_corrections ORDER BY block_number, vault',
  );
  // The timestamps of the blocks that hold any raw row, in one read.
  const timestamps = await sql.all<{ number: number; timestamp: number }>(
    `SELECT number, timestamp FROM blocks WHERE number IN (
       SELECT block_number FROM logs UNION SELECT block_number FROM failed_calls
       UNION SELECT block_number FROM vault_corrections)`,
  );
  const timestampOf = new Map(timestamps.map((row) => [Number(row.number), Number(row.timestamp)]));
  const byBlock = new Map<number, Omit<RawBlock, 'number' | 'timestamp'>>();
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
      ...(row.tx_input !== null && { input: row.tx_input }),
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
  return [...byBlock.keys()]
    .sort((a, b) => a - b)
    .map((number) => {
      const timestamp = timestampOf.get(number);
      if (timestamp === undefined)
        throw new Error(`the index holds raw rows of no block ${number}`);
      return {
        ...(byBlock.get(number) as Omit<RawBlock, 'number' | 'timestamp'>),
        number,
        timestamp,
      };
    });
}

/**
 * The transactions seen (in logs or reverted calls) in blocks after `above`, but for the logs
 * of the contracts `apart` names (the governor's and AgentPass's: lost-write reports count the
 * vaults' and the registry's transactions, as they did before those were indexed).
 */
export function witnessedAfter(
  sql: Sql,
  above: number,
  apart: readonly string[] = [],
): Promise<Array<{ block_number: number; tx_hash: Hash }>> {
  const others = apart.length > 0 ? ` AND address NOT IN (${apart.map(() => '?').join(', ')})` : '';
  return sql.all(
    `SELECT block_number, tx_hash FROM logs WHERE block_number > ?${others}
     UNION SELECT block_number, tx_hash FROM failed_calls WHERE block_number > ?`,
    above,
    ...apart,
    above,
  );
}
