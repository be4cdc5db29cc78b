import { createHash } from 'node:crypto';
import rateLimit from '@fastify/rate-limit';
import type { FastifyInstance, FastifyRequest, onRequestAsyncHookHandler } from 'fastify';
import { HttpError } from '../errors.ts';

/** The spec's limits. Each scope is one bucket shared by all the routes in it. */
export const LIMITS = {
  /** Public endpoints and authenticated reads, per client IP. */
  public: { max: 60, timeWindow: 60_000 },
  /** Deposit, strategy submit and vote, per API key. */
  writes: { max: 10, timeWindow: 60_000 },
  /** Faucet, per API key. */
  faucet: { max: 5, timeWindow: 60_000 },
} as const;

export type RateLimitHooks = Record<keyof typeof LIMITS, onRequestAsyncHookHandler>;

/** Buckets per API key (hashed: the key never sits in memory longer than needed); no key, per IP. */
function apiKeyOrIp(request: FastifyRequest): string {
  const key = request.headers['x-api-key'];
  if (typeof key === 'string' && key.length > 0) {
    return `key:${createHash('sha256').update(key).digest('hex')}`;
  }
  return `ip:${request.ip}`;
}

/**
 * Registers @fastify/rate-limit and returns one onRequest hook per scope. Over the limit the
 * answer is 429 with Retry-After in seconds; the plugin's ban (403) feature is never enabled.
 * With `enabled` false every hook is a no-op (serve --rate-limit off).
 */
export async function registerRateLimits(
  app: FastifyInstance,
  enabled: boolean,
): Promise<RateLimitHooks> {
  if (!enabled) {
    const unlimited: onRequestAsyncHookHandler = async () => {};
    return { public: unlimited, writes: unlimited, faucet: unlimited };
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
    writes: app.rateLimit({ ...LIMITS.writes, keyGenerator: apiKeyOrIp }),
    faucet: app.rateLimit({ ...LIMITS.faucet, keyGenerator: apiKeyOrIp }),
  } as RateLimitHooks;
}
