import { createHash } from 'node:crypto';
import type { Sql } from './sql.ts';

/**
 * The rate limits' counts in the database (migration 7), for servers that share it: each
 * request is one atomic upsert, so that replicas answering the same clients count each of them
 * once. A window starts at the caller's first request and lasts `windowMs`, as in
 * @fastify/rate-limit's memory store; a request after it starts the next one.
 *
 * Keys are the limiter's (the scope, then an IP address, an agent id or a node id): never an API
 * key. A key longer than KEY_MAX_CHARS (an X-Forwarded-For a client wrote, behind a proxy that
 * passes it on) is kept as its SHA-256, so a row stays small whatever a client sends.
 */

/** The count of one key's window, once this request is in it. */
export interface RateCount {
  count: number;
  /** Wall-clock Unix milliseconds at which the window ends. */
  expiresMs: number;
}

/** What a purge removed: windows that were over, and rows forgotten at the bound. */
export interface RatePurge {
  expired: number;
  evicted: number;
}

/**
 * Rows kept after a purge. Each caller holds a few (Part A's public bucket, the data API's
 * minute and day), so this is tens of thousands of callers. At the bound the rows with the fewest
 * requests are forgotten first: forgetting a count of c lets its caller make at most c more
 * requests in that window, so the fewest extra requests get through.
 */
export const RATE_COUNT_MAX_ROWS = 100_000;

/** Keys longer than this are stored as their SHA-256. */
export const KEY_MAX_CHARS = 200;

function storedKey(key: string): string {
  return key.length <= KEY_MAX_CHARS
    ? key
    : `sha256:${createHash('sha256').update(key).digest('hex')}`;
}

export function createRateCountStore(sql: Sql) {
  const size = async (): Promise<number> => {
    const row = await sql.get<{ n: number }>('SELECT count(*) AS n FROM rate_counts');
    return Number(row?.n ?? 0);
  };
  return {
    /**
     * Counts one request of `key` in its window of `windowMs` (a new window when there is none,
     * or the last one ended by `nowMs`), in one statement: requests made at once, from any
     * number of processes, each get their own count.
     */
    async increment(key: string, windowMs: number, nowMs: number): Promise<RateCount> {
      // In DO UPDATE, rate_counts.* is the row as it was and excluded.* the row offered: its
      // expires_ms - window_ms is nowMs. Portable: SQLite ≥ 3.35 and PostgreSQL.
      const row = await sql.get<{ count: number; expires_ms: number }>(
        `INSERT INTO rate_counts (key, window_ms, count, expires_ms) VALUES (?, ?, 1, ?)
         ON CONFLICT (key, window_ms) DO UPDATE SET
           count = CASE WHEN rate_counts.expires_ms <= excluded.expires_ms - excluded.window_ms
             THEN 1 ELSE rate_counts.count + 1 END,
           expires_ms = CASE WHEN rate_counts.expires_ms <= excluded.expires_ms - excluded.window_ms
             THEN excluded.expires_ms ELSE rate_counts.expires_ms END
         RETURNING count, expires_ms`,
        storedKey(key),
        windowMs,
        nowMs + windowMs,
      );
      if (row === undefined) throw new Error('the rate count upsert returned no row');
      return { count: Number(row.count), expiresMs: Number(row.expires_ms) };
    },
    /**
     * Deletes the windows over by `nowMs`, then, beyond `maxRows`, the rows with the fewest
     * requests (the newest windows first among equals).
     */
    async purge(nowMs: number, maxRows = RATE_COUNT_MAX_ROWS): Promise<RatePurge> {
      const { changes: expired } = await sql.run(
        'DELETE FROM rate_counts WHERE expires_ms <= ?',
        nowMs,
      );
      const over = (await size()) - maxRows;
      if (over <= 0) return { expired, evicted: 0 };
      const { changes: evicted } = await sql.run(
        `DELETE FROM rate_counts WHERE (key, window_ms) IN (
           SELECT key, window_ms FROM rate_counts ORDER BY count, expires_ms DESC LIMIT ?)`,
        over,
      );
      return { expired, evicted };
    },
    /** The rows held now. */
    size,
    /** The count of `key`'s window of `windowMs` as stored (over or not), for tests. */
    async peek(key: string, windowMs: number): Promise<RateCount | undefined> {
      const row = await sql.get<{ count: number; expires_ms: number }>(
        'SELECT count, expires_ms FROM rate_counts WHERE key = ? AND window_ms = ?',
        storedKey(key),
        windowMs,
      );
      return row && { count: Number(row.count), expiresMs: Number(row.expires_ms) };
    },
  };
}
export type RateCountStore = ReturnType<typeof createRateCountStore>;
