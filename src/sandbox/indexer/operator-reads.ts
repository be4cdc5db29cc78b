import type { Indexer } from './indexer.ts';
import { statement } from './statements.ts';

/**
 * The index as the sandbox's own operator (the ERC-7540 fulfiller) reads it: named queries, so
 * that the SQL against the index's tables stays in the indexer. Each is compiled per database by
 * statement() and run through index.read(): a failed index.db is replaced by a rebuilt one,
 * whose statements are its own, and a read of a failed one is IndexUnavailableError.
 */

/** Transactions indexed after a key, in index order, to find the agents' new requests. */
export const INDEXED_AFTER_SQL = `SELECT block_number, log_index, vault, request_id, user_address, status, timestamp
  FROM transactions WHERE (block_number, log_index) > (?, ?)
  ORDER BY block_number, log_index LIMIT ?`;

/**
 * A vault's pending requests that are due (requested at or before the given time), oldest
 * first, `LIMIT` at a time. The partial index holds pending requests only, so the look costs
 * the same however many requests were fulfilled or claimed before.
 */
export const DUE_REQUESTS_SQL = `SELECT request_id FROM transactions
  WHERE vault = ? AND status = 'pending' AND timestamp <= ?
  ORDER BY timestamp, block_number, log_index LIMIT ?`;

/** One indexed transaction, as the operator looks through them. */
export interface IndexedTransaction {
  block_number: number;
  log_index: number;
  vault: string;
  request_id: string | null;
  user_address: string;
  status: string;
  timestamp: number;
}

/** An ERC-7540 request still pending. */
export interface PendingRequest {
  vault: string;
  request_id: string;
  user_address: string;
  timestamp: number;
}

export function operatorReads(index: Pick<Indexer, 'read' | 'db'>) {
  type Param = string | number;
  const all =
    <T>(sql: string) =>
    (...params: Param[]): T[] =>
      index.read(() => statement(index.db, sql).all(...params) as unknown as T[]);
  const get =
    <T>(sql: string) =>
    (...params: Param[]): T | undefined =>
      index.read(() => statement(index.db, sql).get(...params) as unknown as T | undefined);
  const dueRequests = all<{ request_id: string }>(DUE_REQUESTS_SQL);

  return {
    /** The asynchronous vaults and their fulfilment delays (seconds). */
    vaultDelays: all<{ address: string; fulfillment_delay: number }>(
      'SELECT address, fulfillment_delay FROM vaults WHERE fulfillment_delay IS NOT NULL',
    ),
    /** Ids of `vault`'s pending requests made at or before `dueBy`, oldest first. */
    dueRequestIds: (vault: string, dueBy: number, limit: number): string[] =>
      dueRequests(vault, dueBy, limit).map((row) => row.request_id),
    /** One request of `vault`, by id: (vault, requestId). */
    request: get<{ status: string; timestamp: number; user_address: string }>(
      `SELECT status, timestamp, user_address FROM transactions
       WHERE vault = ? AND request_id = ? AND type IN ('deposit_request', 'redeem_request')`,
    ),
    /** At most `limit` transactions indexed after (block, log index), in index order. */
    indexedAfter: all<IndexedTransaction>(INDEXED_AFTER_SQL) as (
      block: number,
      logIndex: number,
      limit: number,
    ) => IndexedTransaction[],
    /** What a user (lower case) may claim from a vault, in raw units: (user, vault). */
    claimable: get<{ claimable_deposit: string; claimable_redeem: string }>(
      'SELECT claimable_deposit, claimable_redeem FROM positions WHERE user_address = ? AND vault = ?',
    ),
    /** Every request still pending. */
    pendingRequests: all<PendingRequest>(
      "SELECT vault, request_id, user_address, timestamp FROM transactions WHERE status = 'pending'",
    ),
    /** Every position with something fulfilled and not yet claimed. */
    claimablePositions: all<{ user_address: string; vault: string }>(
      `SELECT user_address, vault FROM positions
       WHERE claimable_deposit <> '0' OR claimable_redeem <> '0'`,
    ),
  };
}
export type OperatorReads = ReturnType<typeof operatorReads>;
