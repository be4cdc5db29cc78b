import rateLimit from '@fastify/rate-limit';
import type { FastifyInstance, FastifyRequest, onRequestAsyncHookHandler } from 'fastify';
import { HttpError } from '../errors.ts';

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
 * Per-key scopes run after `authenticate` and count per agent, so made-up keys neither get
 * buckets of their own nor push real agents' buckets out of the limiter's memory.
 */
function byAgent(request: FastifyRequest): string {
  return request.agent ? `agent:${request.agent.agent_id}` : `ip:${request.ip}`;
}

/**
 * Registers @fastify/rate-limit and returns one onRequest hook per scope. Over the limit the
 * answer is 429 with Retry-After in seconds; the plugin's ban (403) feature is never enabled.
 * With `enabled` false every hook is a no-op (serve --rate-limit off).
 */
export async function registerRateLimits(
  app: FastifyInstance,
  enabled: boolean,
  dataTiers: DataTiers = DATA_TIERS,
): Promise<RateLimitHooks> {
  if (!enabled) {
    const unlimited: onRequestAsyncHookHandler = async () => {};
    return {
      public: unlimited,
      writes: unlimited,
      faucet: unlimited,
      data: async () => undefined,
    };
  }
  await app.register(rateLimit, {
    global: false,
    errorResponseBuilder: (_request, context) =>
      new HttpError(
        429,
        `rate limit exceeded: at most ${context.max} requests per minute; retry in ${context.after}`,
      ),
  });
  return {
    public: app.rateLimit(LIMITS.public),
    writes: app.rateLimit({ ...LIMITS.writes, keyGenerator: byAgent }),
    faucet: app.rateLimit({ ...LIMITS.faucet, keyGenerator: byAgent }),
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
    return `${caller.tier}:${caller.id}`;
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
