import type { Sql } from '../store/sql.ts';
import type { IndexView } from './view.ts';

/**
 * The index as the sandbox's own operator (the ERC-7540 fulfiller) reads it: named queries, so
 * that the SQL against the index's tables stays in the indexer. Each is one statement run
 * through IndexView.read: a read of a failed index is IndexUnavailableError, and a rebuilt one
 * is read the same way.
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
  block_number: number | string;
  log_index: number;
  vault: string;
  request_id: string | null;
  user_address: string;
  status: string;
  timestamp: number | string;
}

/** An ERC-7540 request still pending. */
export interface PendingRequest {
  vault: string;
  request_id: string;
  user_address: string;
  timestamp: number | string;
}

/** Request ids looked up per statement (requestsOf): one SQL text, padded to it. */
export const REQUESTS_PER_STATEMENT = 100;

/** The requests of a vault with these ids (a list of REQUESTS_PER_STATEMENT, padded). */
export const REQUESTS_SQL = `SELECT request_id, status, timestamp, user_address FROM transactions
  WHERE vault = ? AND request_id IN (${Array(REQUESTS_PER_STATEMENT).fill('?').join(', ')})
    AND type IN ('deposit_request', 'redeem_request')
  ORDER BY block_number, log_index`;

/** One request of a vault, as the fulfiller follows it. */
export interface RequestRow {
  request_id: string;
  status: string;
  timestamp: number | string;
  user_address: string;
}

export function operatorReads(index: Pick<IndexView, 'read'>) {
  type Param = string | number;
  const all =
    <T>(statement: string) =>
    (...params: Param[]): Promise<T[]> =>
      index.read((sql: Sql) => sql.all<T>(statement, ...params));
  const get =
    <T>(statement: string) =>
    (...params: Param[]): Promise<T | undefined> =>
      index.read((sql: Sql) => sql.get<T>(statement, ...params));
  const dueRequests = all<{ request_id: string }>(DUE_REQUESTS_SQL);

  return {
    /** The asynchronous vaults and their fulfilment delays (seconds). */
    vaultDelays: all<{ address: string; fulfillment_delay: number | string }>(
      'SELECT address, fulfillment_delay FROM vaults WHERE fulfillment_delay IS NOT NULL ORDER BY address',
    ),
    /** Ids of `vault`'s pending requests made at or before `dueBy`, oldest first. */
    dueRequestIds: async (vault: string, dueBy: number, limit: number): Promise<string[]> =>
      (await dueRequests(vault, dueBy, limit)).map((row) => row.request_id),
    /**
     * The requests of `vault` with these ids, by id (the first indexed where two share one),
     * in one read: REQUESTS_PER_STATEMENT ids per statement.
     */
    requests: (vault: string, ids: readonly string[]): Promise<Map<string, RequestRow>> =>
      index.read(async (sql: Sql) => {
        const found = new Map<string, RequestRow>();
        for (let i = 0; i < ids.length; i += REQUESTS_PER_STATEMENT) {
          const chunk = ids.slice(i, i + REQUESTS_PER_STATEMENT);
          // Padded with its first id: every statement has the same text (compiled once).
          const padded = [...chunk, ...Array(REQUESTS_PER_STATEMENT - chunk.length).fill(chunk[0])];
          for (const row of await sql.all<RequestRow>(REQUESTS_SQL, vault, ...padded)) {
            if (!found.has(row.request_id)) found.set(row.request_id, row);
          }
        }
        return found;
      }),
    /** At most `limit` transactions indexed after (block, log index), in index order. */
    indexedAfter: all<IndexedTransaction>(INDEXED_AFTER_SQL) as (
      block: number,
      logIndex: number,
      limit: number,
    ) => Promise<IndexedTransaction[]>,
    /** What a user (lower case) may claim from a vault, in raw units: (user, vault). */
    claimable: get<{ claimable_deposit: string; claimable_redeem: string }>(
      'SELECT claimable_deposit, claimable_redeem FROM positions WHERE user_address = ? AND vault = ?',
    ),
    /**
     * Every request still pending, oldest first (in an order of its own: PostgreSQL's rows come
     * in no order without one, and the first are those followed).
     */
    pendingRequests: all<PendingRequest>(
      `SELECT vault, request_id, user_address, timestamp FROM transactions
       WHERE status = 'pending' ORDER BY block_number, log_index`,
    ),
    /** Every position with something fulfilled and not yet claimed (by vault, then user). */
    claimablePositions: all<{ user_address: string; vault: string }>(
      `SELECT user_address, vault FROM positions
       WHERE claimable_deposit <> '0' OR claimable_redeem <> '0'
       ORDER BY vault, user_address`,
    ),
  };
}
export type OperatorReads = ReturnType<typeof operatorReads>;
