import type { Hash, Hex } from 'viem';

/**
 * The types the store keeps and answers. The chain writes through them (the block producer
 * commits its blocks to the chain log with commitBlocks); the store depends on no other layer.
 */

/** One block as the chain log keeps it: enough to mine it again, identically. */
export interface LoggedBlock {
  number: number;
  hash: Hash;
  parentHash: Hash;
  timestamp: number;
  /** Raw signed transactions, in block order. */
  txs: Hex[];
  /** Their hashes (keccak256 of each raw transaction). */
  txHashes: Hash[];
}

/** What one record run inside a commit gave: its value, or the error that lost its rows. */
export type RecordOutcome<T = unknown> = { ok: true; value: T } | { ok: false; error: unknown };
