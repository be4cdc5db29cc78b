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

export type RateLimitHooks = Record<keyof typeof LIMITS, onRequestAsyncHookHandler>;

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
    writes: app.rateLimit({ ...LIMITS.writes, keyGenerator: byAgent }),
    faucet: app.rateLimit({ ...LIMITS.faucet, keyGenerator: byAgent }),
  } as RateLimitHooks;
}
