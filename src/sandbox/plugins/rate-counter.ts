import type { FastifyRateLimitStore, FastifyRateLimitStoreCtor } from '@fastify/rate-limit';
import type { RateCount, RateCountStore } from '../store/rate-counts.ts';

/**
 * @fastify/rate-limit's store (its `store` option) counting in the database, for servers that
 * share one (replicas): a caller's requests are counted once, whichever server answers them.
 *
 * A database that cannot count (unreachable, a closed connection, slower than COUNT_TIMEOUT_MS)
 * fails OPEN TO THIS PROCESS: the request is counted in this process's memory instead, with the
 * same windows and limits, and for LOCAL_AFTER_FAILURE_MS after a failure every request is, so
 * that an outage costs no request a wait. The limits then still hold per server (N replicas let
 * a caller through at most N times its tier while the database is away), and no request is ever
 * refused for a count that could not be made: a 429 says the caller is over its limit, never
 * that the database is down (a replica's own reads answer 503 for that). Never a 500, never a
 * wait beyond COUNT_TIMEOUT_MS.
 */

/** How long a count may take before the request is counted in memory instead. */
export const COUNT_TIMEOUT_MS = 2500;
/** After a count failed, how long requests are counted in memory before the database is tried. */
export const LOCAL_AFTER_FAILURE_MS = 5000;
/** How often expired windows are purged (and the table brought back to its bound). */
export const PURGE_EVERY_MS = 10_000;
/** Windows the memory fallback holds; the oldest is forgotten beyond it. */
export const LOCAL_MAX_WINDOWS = 20_000;

export interface DatabaseCounterOptions {
  counts: RateCountStore;
  log: { warn(message: string): void; info(message: string): void };
  /** LOCAL_AFTER_FAILURE_MS unless given. */
  localAfterFailureMs?: number;
  /** Windows the memory fallback holds (LOCAL_MAX_WINDOWS). */
  localMaxWindows?: number;
  /** Rows the table keeps after a purge (RATE_COUNT_MAX_ROWS). */
  maxRows?: number;
}

export interface DatabaseCounter {
  /** The class for @fastify/rate-limit's `store` option. */
  Store: FastifyRateLimitStoreCtor;
  /** Purges expired windows and keeps the table to its bound (PURGE_EVERY_MS, once started). */
  purge(): Promise<void>;
  startPurging(): void;
  stop(): void;
}

/** Windows counted in this process, as the database counts them; bounded. */
function createLocalWindows(maxWindows: number) {
  const windows = new Map<string, RateCount>();
  return (key: string, windowMs: number, nowMs: number): RateCount => {
    const id = `${windowMs}:${key}`;
    const current = windows.get(id);
    const next =
      current === undefined || current.expiresMs <= nowMs
        ? { count: 1, expiresMs: nowMs + windowMs }
        : { count: current.count + 1, expiresMs: current.expiresMs };
    // Re-inserted, so that Map order is least recently counted first.
    windows.delete(id);
    windows.set(id, next);
    if (windows.size > maxWindows) windows.delete(windows.keys().next().value as string);
    return next;
  };
}

function withTimeout<T>(work: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
  });
  return Promise.race([work, timeout]).finally(() => clearTimeout(timer));
}

export function createDatabaseCounter(options: DatabaseCounterOptions): DatabaseCounter {
  const { counts, log } = options;
  // Wall-clock time: windows are real minutes and days (never sandbox time).
  const now = Date.now;
  const localAfterFailureMs = options.localAfterFailureMs ?? LOCAL_AFTER_FAILURE_MS;
  const local = createLocalWindows(options.localMaxWindows ?? LOCAL_MAX_WINDOWS);
  /** Until when requests are counted in memory (0: in the database). */
  let localUntil = 0;

  async function count(key: string, windowMs: number): Promise<RateCount> {
    const at = now();
    if (localUntil > at) return local(key, windowMs, at);
    try {
      const counted = await withTimeout(counts.increment(key, windowMs, at), COUNT_TIMEOUT_MS);
      if (localUntil !== 0) {
        localUntil = 0;
        log.info('rate limits: counting in the database again');
      }
      return counted;
    } catch (error) {
      if (localUntil === 0) {
        log.warn(
          `rate limits: the database did not count a request (${(error as Error).message}); counting in this process for ${localAfterFailureMs} ms at a time until it does`,
        );
      }
      localUntil = now() + localAfterFailureMs;
      return local(key, windowMs, at);
    }
  }

  class DatabaseStore implements FastifyRateLimitStore {
    incr(
      key: string,
      callback: (error: Error | null, result?: { current: number; ttl: number }) => void,
      timeWindow: number,
    ): void {
      count(key, timeWindow).then(
        ({ count: current, expiresMs }) =>
          // At least 1 ms: a window another server's clock ends a little later is still on.
          callback(null, { current, ttl: Math.max(1, expiresMs - now()) }),
        (error: Error) => callback(error),
      );
    }
    // Every limiter shares the one table; its keys say which scope they count.
    child(): FastifyRateLimitStore {
      return new DatabaseStore();
    }
  }

  let purging: NodeJS.Timeout | undefined;
  let purgeFailed = false;
  let running: Promise<void> | undefined;
  const purge = (): Promise<void> => {
    // One at a time: a slow purge is not stacked on.
    running ??= purgeOnce().finally(() => {
      running = undefined;
    });
    return running;
  };
  async function purgeOnce(): Promise<void> {
    try {
      const { evicted } = await counts.purge(now(), options.maxRows);
      if (evicted > 0) {
        log.warn(
          `rate limits: ${evicted} counts forgotten (the fewest requests first) to keep the table to its bound`,
        );
      }
      purgeFailed = false;
    } catch (error) {
      if (!purgeFailed) {
        log.warn(`rate limits: expired counts not purged: ${(error as Error).message}`);
      }
      purgeFailed = true;
    }
  }
  return {
    Store: DatabaseStore as unknown as FastifyRateLimitStoreCtor,
    purge,
    startPurging() {
      purging ??= setInterval(() => void purge(), PURGE_EVERY_MS);
      purging.unref();
    },
    stop() {
      clearInterval(purging);
      purging = undefined;
    },
  };
}
