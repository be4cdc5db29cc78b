import type { Hash, Hex } from 'viem';
import type { Sql } from './sql.ts';
import type { LoggedBlock } from './types.ts';

interface BlockRow {
  number: number;
  hash: string;
  parent_hash: string;
  timestamp: number;
  txs: string;
}

const toBlock = (row: BlockRow): LoggedBlock => {
  const txs = JSON.parse(row.txs) as Hex[];
  return {
    number: row.number,
    hash: row.hash as Hash,
    parentHash: row.parent_hash as Hash,
    timestamp: row.timestamp,
    txs,
    txHashes: [],
  };
};

/**
 * The chain log: blocks since the last checkpoint. Appended inside the durable transaction of
 * the write that made each block; cut back once a newer checkpoint is on disk, to it or to the
 * few blocks before it that the warm standby has yet to mine.
 */
export function createChainLogStore(sql: Sql) {
  return {
    /** Call inside a transaction. */
    async append(blocks: LoggedBlock[]): Promise<void> {
      for (const block of blocks) {
        await sql.run(
          'INSERT INTO chain_blocks (number, hash, parent_hash, timestamp, txs) VALUES (?, ?, ?, ?, ?)',
          block.number,
          block.hash,
          block.parentHash,
          block.timestamp,
          JSON.stringify(block.txs),
        );
      }
    },
    /** Logged blocks after `number`, oldest first. */
    async after(number: number): Promise<LoggedBlock[]> {
      const rows = await sql.all<BlockRow>(
        'SELECT * FROM chain_blocks WHERE number > ? ORDER BY number',
        number,
      );
      return rows.map(toBlock);
    },
    /** At most `limit` logged blocks after `number`, oldest first. */
    async next(number: number, limit: number): Promise<LoggedBlock[]> {
      const rows = await sql.all<BlockRow>(
        'SELECT * FROM chain_blocks WHERE number > ? ORDER BY number LIMIT ?',
        number,
        limit,
      );
      return rows.map(toBlock);
    },
    /** The newest logged block, if any. */
    async last(): Promise<LoggedBlock | undefined> {
      const row = await sql.get<BlockRow>(
        'SELECT * FROM chain_blocks ORDER BY number DESC LIMIT 1',
      );
      return row && toBlock(row);
    },
    async find(number: number): Promise<LoggedBlock | undefined> {
      const row = await sql.get<BlockRow>('SELECT * FROM chain_blocks WHERE number = ?', number);
      return row && toBlock(row);
    },
    /** Records that block `number` was rebuilt with another hash. */
    async rehash(number: number, hash: Hash, parentHash: Hash): Promise<void> {
      await sql.run(
        'UPDATE chain_blocks SET hash = ?, parent_hash = ? WHERE number = ?',
        hash,
        parentHash,
        number,
      );
    },
    /** Drops blocks a checkpoint now holds. Call inside a transaction. */
    async truncateThrough(number: number): Promise<void> {
      await sql.run('DELETE FROM chain_blocks WHERE number <= ?', number);
    },
  };
}
export type ChainLogStore = ReturnType<typeof createChainLogStore>;
