import type { Hash, Hex } from 'viem';
import type { Database } from './db.ts';
import type { LoggedBlock } from './types.ts';

interface BlockRow {
  number: number;
  hash: string;
  parent_hash: string;
  timestamp: number;
  txs: string;
}

/**
 * The chain log: blocks since the last checkpoint. Appended inside the durable transaction of
 * the write that made each block; cut back once a newer checkpoint is on disk, to it or to the
 * few blocks before it that the warm standby has yet to mine.
 */
export function createChainLogStore(db: Database) {
  const insert = db.prepare(
    'INSERT INTO chain_blocks (number, hash, parent_hash, timestamp, txs) VALUES (?, ?, ?, ?, ?)',
  );
  const after = db.prepare('SELECT * FROM chain_blocks WHERE number > ? ORDER BY number');
  const afterLimited = db.prepare(
    'SELECT * FROM chain_blocks WHERE number > ? ORDER BY number LIMIT ?',
  );
  const byNumber = db.prepare('SELECT * FROM chain_blocks WHERE number = ?');
  const newest = db.prepare('SELECT * FROM chain_blocks ORDER BY number DESC LIMIT 1');
  const truncate = db.prepare('DELETE FROM chain_blocks WHERE number <= ?');
  const rehash = db.prepare('UPDATE chain_blocks SET hash = ?, parent_hash = ? WHERE number = ?');

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

  return {
    /** Call inside a transaction. */
    append(blocks: LoggedBlock[]): void {
      for (const block of blocks) {
        insert.run(
          block.number,
          block.hash,
          block.parentHash,
          block.timestamp,
          JSON.stringify(block.txs),
        );
      }
    },
    /** Logged blocks after `number`, oldest first. */
    *after(number: number): Generator<LoggedBlock> {
      for (const row of after.iterate(number)) yield toBlock(row as unknown as BlockRow);
    },
    /** At most `limit` logged blocks after `number`, oldest first. */
    next(number: number, limit: number): LoggedBlock[] {
      return afterLimited.all(number, limit).map((row) => toBlock(row as unknown as BlockRow));
    },
    /** The newest logged block, if any. */
    last(): LoggedBlock | undefined {
      const row = newest.get() as BlockRow | undefined;
      return row && toBlock(row);
    },
    find(number: number): LoggedBlock | undefined {
      const row = byNumber.get(number) as BlockRow | undefined;
      return row && toBlock(row);
    },
    /** Records that block `number` was rebuilt with another hash. */
    rehash(number: number, hash: Hash, parentHash: Hash): void {
      rehash.run(hash, parentHash, number);
    },
    /** Drops blocks a checkpoint now holds. Call inside a transaction. */
    truncateThrough(number: number): void {
      truncate.run(number);
    },
  };
}
export type ChainLogStore = ReturnType<typeof createChainLogStore>;
