import rateLimit, { normalizeIP } from '@fastify/rate-limit';
import type { FastifyInstance, FastifyRequest, onRequestAsyncHookHandler } from 'fastify';
import { HttpError } from '../errors.ts';
import { createDatabaseCounter, type DatabaseCounterOptions } from './rate-counter.ts';

/** The spec's limits. Each scope is one bucket shared by all the routes in it. */
export const LIMITS = {
  /** Public endpoints and authenticated reads, per client IP. */
  public: { max: 60, timeWindow: 60_000 },
  /** Deposit, strategy submit and vote, per API key (per agent). Place after `authenticate`. */
  writes: { max: 10, timeWindow: 60_000 },
  /** Faucet, per API key (per agent). Place after `authenticate`. */
  faucet: { max: 5, timeWindow: 60_000 },
} as const;

/**
 * The data API's tiers (/v1, and GraphQL after it), counted apart from Part A's buckets, each
 * in a minute window and a day window. A node key's tier has no daily cap.
 */
export const DATA_TIERS: DataTiers = {
  public: { perMinute: 60, perDay: 10_000 },
  authenticated: { perMinute: 300, perDay: 100_000 },
  node: { perMinute: 1000, perDay: null },
};
export type DataTier = 'public' | 'authenticated' | 'node';
export type DataTiers = Record<DataTier, { perMinute: number; perDay: number | null }>;

/** Who a data API request counts against: its tier, and its IP, agent or node. */
export interface DataCaller {
  tier: DataTier;
  id: string;
}

/** Over a limit: which window, its limit, and the seconds until it frees up. */
export interface DataLimitExceeded {
  window: 'minute' | 'day';
  limit: number;
  retryAfter: number;
}

/** Counts one request against the caller's windows; what was exceeded, or undefined. */
export type DataLimiter = (
  request: FastifyRequest,
  caller: DataCaller,
) => Promise<DataLimitExceeded | undefined>;

export type RateLimitHooks = Record<keyof typeof LIMITS, onRequestAsyncHookHandler> & {
  data: DataLimiter;
};

/**
 * Where the windows are counted: in this process's memory (the default on SQLite: one process,
 * the fastest), or in the database (store/rate-counts.ts), which servers sharing it (replicas on
 * PostgreSQL) count together. See plugins/rate-counter.ts for a database that cannot count.
 */
export type RateLimitCounts = 'memory' | 'database';

export interface RateLimitSettings {
  /** false: every hook is a no-op (serve --rate-limit off). */
  enabled: boolean;
  dataTiers?: DataTiers;
  /** The database's counts: given, the windows are counted there rather than in memory. */
  database?: Omit<DatabaseCounterOptions, 'log'>;
}

/**
 * Per-key scopes run after `authenticate` and count per agent, so made-up keys neither get
 * buckets of their own nor push real agents' buckets out of the limiter's memory (or rows into
 * the database's counts).
 */
function byAgent(request: FastifyRequest): string {
  return request.agent ? `agent:${request.agent.agent_id}` : `ip:${request.ip}`;
}

/**
 * Registers @fastify/rate-limit and returns one onRequest hook per scope. Over the limit the
 * answer is 429 with Retry-After in seconds; the plugin's ban (403) feature is never enabled.
 * Each key starts with its scope (public:, writes:, faucet:, data:), since in the database every
 * limiter counts in one table.
 */
export async function registerRateLimits(
  app: FastifyInstance,
  settings: RateLimitSettings,
): Promise<RateLimitHooks> {
  const { enabled, dataTiers = DATA_TIERS, database } = settings;
  if (!enabled) {
    const unlimited: onRequestAsyncHookHandler = async () => {};
    return {
      public: unlimited,
      writes: unlimited,
      faucet: unlimited,
      data: async () => undefined,
    };
  }
  const counter = database && createDatabaseCounter({ ...database, log: app.log });
  if (counter) {
    counter.startPurging();
    app.addHook('onClose', async () => counter.stop());
  }
  await app.register(rateLimit, {
    global: false,
    ...(counter && { store: counter.Store }),
    errorResponseBuilder: (_request, context) =>
      new HttpError(
        429,
        `rate limit exceeded: at most ${context.max} requests per minute; retry in ${context.after}`,
      ),
  });
  return {
    public: app.rateLimit({
      ...LIMITS.public,
      // The plugin's own key, with the scope in front: IPv6 addresses by their /64.
      keyGenerator: (request) => `public:${normalizeIP(request.ip)}`,
    }),
    writes: app.rateLimit({
      ...LIMITS.writes,
      keyGenerator: (request) => `writes:${byAgent(request)}`,
    }),
    faucet: app.rateLimit({
      ...LIMITS.faucet,
      keyGenerator: (request) => `faucet:${byAgent(request)}`,
    }),
    data: createDataLimiter(app, dataTiers),
  } as RateLimitHooks;
}

/**
 * The data API's two windows. A route's second stacked limiter would be skipped (the plugin
 * marks a request as limited once), so both windows are limiters from createRateLimit(),
 * applied here in turn: a request over the minute's limit is not counted in the day's.
 */
function createDataLimiter(app: FastifyInstance, tiers: DataTiers): DataLimiter {
  const callers = new WeakMap<FastifyRequest, DataCaller>();
  const keyOf = (request: FastifyRequest) => {
    const caller = callers.get(request) as DataCaller;
    return `data:${caller.tier}:${caller.id}`;
  };
  const tierOf = (request: FastifyRequest) => tiers[(callers.get(request) as DataCaller).tier];
  const minute = app.createRateLimit({
    timeWindow: 60_000,
    max: (request) => tierOf(request).perMinute,
    keyGenerator: keyOf,
  });
  const day = app.createRateLimit({
    timeWindow: 24 * 3600_000,
    max: (request) => tierOf(request).perDay ?? Number.MAX_SAFE_INTEGER,
    keyGenerator: keyOf,
  });
  return async (request, caller) => {
    callers.set(request, caller);
    const windows = [
      { window: 'minute' as const, check: minute },
      ...(tiers[caller.tier].perDay === null ? [] : [{ window: 'day' as const, check: day }]),
    ];
    for (const { window, check } of windows) {
      const result = await check(request);
      if (!result.isAllowed && result.isExceeded) {
        return { window, limit: result.max, retryAfter: Math.max(1, result.ttlInSeconds) };
      }
    }
    return undefined;
  };
}
