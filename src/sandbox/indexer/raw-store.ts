import { chmodSync, copyFileSync } from 'node:fs';
import type { DatabaseSync } from 'node:sqlite';
import type { Hash, Hex } from 'viem';
import { copyDatabase } from '../store/copy.ts';
import type { FailedCall, RawLog, VaultState } from './projection.ts';
import { type StateRow, toState } from './reads.ts';
import { DERIVED_TABLES, openIndexDatabase, removeIndexFiles } from './schema.ts';
import type { Header, SourcedLog } from './source.ts';

/**
 * index.db's raw side: the blocks, logs, reverted vault calls and corrections as read from the
 * chain, kept apart from the tables derived from them (projection.ts), so that a reorg or a
 * correction is "cut the raw rows back and derive again". It owns the file: opening it (or
 * starting it afresh), its transactions, and closing it.
 */

/** One block's raw rows, as the derived tables are built from them. */
export interface RawBlock {
  number: number;
  timestamp: number;
  logs: RawLog[];
  failed: FailedCall[];
  corrections: Array<[string, VaultState]>;
}

export function openRawStore(options: {
  path: string;
  /** The chain and contracts the file belongs to: a file of another is started afresh. */
  identity: string;
  warn(message: string): void;
}) {
  let db: DatabaseSync = openIndexDatabase(options.path, options.identity, options.warn);

  const prepare = (db: DatabaseSync) => ({
    head: db.prepare('SELECT number, hash, timestamp FROM blocks ORDER BY number DESC LIMIT 1'),
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

  return {
    /** The open file (the derived tables are read and written through it too). */
    get db(): DatabaseSync {
      return db;
    },
    /**
     * Deletes index.db and opens it empty (every block is indexed into it again), or as the
     * copy at `from` (a snapshot's, made by copyTo).
     */
    reopen(from?: string): void {
      try {
        db.close();
      } catch {
        // A failed file may not close cleanly; it is deleted next.
      }
      removeIndexFiles(options.path);
      if (from !== undefined) {
        copyFileSync(from, options.path);
        chmodSync(options.path, 0o600);
      }
      db = openIndexDatabase(options.path, options.identity, options.warn);
      statements = prepare(db);
    },
    /** Writes a consistent copy of the file to `path` (a new file); call between transactions. */
    copyTo: (path: string) => copyDatabase(db, path),
    begin: () => db.exec('BEGIN'),
    commit: () => db.exec('COMMIT'),
    /** Ends the open transaction; on a failed file SQLite may have ended it already. */
    rollBackQuietly(): void {
      try {
        db.exec('ROLLBACK');
      } catch {
        // No transaction left to roll back: the error that brought us here is what matters.
      }
    },
    /** The last block held. */
    head(): { number: number; hash: Hash; timestamp: number } | undefined {
      return statements.head.get() as { number: number; hash: Hash; timestamp: number } | undefined;
    },
    hashAt: (number: number) => (statements.hashAt.get(number) as { hash: Hash } | undefined)?.hash,
    timestampAt: (number: number) =>
      Number((statements.timestampAt.get(number) as { timestamp: number }).timestamp),
    /** A vault's derived state after block `number` (the last one at or before it). */
    stateAtBlock(vault: string, number: number): VaultState | undefined {
      const row = statements.stateAtBlock.get(vault, number) as StateRow | undefined;
      return row && toState(row);
    },
    /** Writes one block's raw rows (inside the caller's transaction). */
    addBlock(block: Header, logs: SourcedLog[], failed: FailedCall[]): void {
      statements.block.run(block.number, block.hash, block.parentHash, block.timestamp);
      for (const log of logs) {
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
      for (const call of failed) {
        statements.failed.run(
          block.number,
          call.txIndex,
          call.txHash,
          call.from,
          call.to,
          call.input,
        );
      }
    },
    /** Records the chain's state of a vault after block `number`, which no event told of. */
    addCorrection(number: number, vault: string, state: VaultState): void {
      statements.correction.run(
        number,
        vault,
        state.balance.toString(),
        state.reserved.toString(),
        state.totalSupply.toString(),
        Number(state.apyBps),
        Number(state.lastAccrual),
      );
    },
    /**
     * Cuts the raw rows back to block `ancestor` and empties the derived tables, which are
     * then derived again from what remains (inside the caller's transaction).
     */
    cutBackTo(ancestor: number): void {
      db.prepare('DELETE FROM blocks WHERE number > ?').run(ancestor);
      db.prepare('DELETE FROM logs WHERE block_number > ?').run(ancestor);
      db.prepare('DELETE FROM failed_calls WHERE block_number > ?').run(ancestor);
      db.prepare('DELETE FROM vault_corrections WHERE block_number > ?').run(ancestor);
      for (const table of DERIVED_TABLES) db.exec(`DELETE FROM ${table}`);
    },
    /** Every raw row kept, by block, in block order: what the derived tables are built from. */
    rawBlocks(): RawBlock[] {
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
      return [...byBlock.keys()]
        .sort((a, b) => a - b)
        .map((number) => {
          const { timestamp } = timestampAt.get(number) as { timestamp: number };
          return {
            ...(byBlock.get(number) as Omit<RawBlock, 'number' | 'timestamp'>),
            number,
            timestamp: Number(timestamp),
          };
        });
    },
    /** The transactions seen (in logs or reverted calls) in blocks after `above`. */
    witnessedAfter(above: number): Array<{ block_number: number; tx_hash: Hash }> {
      return db
        .prepare(
          `SELECT block_number, tx_hash FROM logs WHERE block_number > ?
           UNION SELECT block_number, tx_hash FROM failed_calls WHERE block_number > ?`,
        )
        .all(above, above) as Array<{ block_number: number; tx_hash: Hash }>;
    },
    close(): void {
      db.close();
    },
  };
}
export type RawStore = ReturnType<typeof openRawStore>;
