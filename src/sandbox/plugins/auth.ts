import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyRequest, onRequestAsyncHookHandler } from 'fastify';
import { type Tier, tierAtLeast } from '../../api/schemas/index.ts';
import { HttpError } from '../errors.ts';
import type { Onboarder } from '../operator/onboarding.ts';
import { hashApiKey } from '../registration.ts';
import type { AgentRow } from '../store/agents.ts';
import type { Store } from '../store/index.ts';

declare module 'fastify' {
  interface FastifyRequest {
    /** The caller, set by `authenticate` on routes that need an API key. */
    agent: AgentRow | null;
  }
}

/** The authenticated caller; only valid on routes guarded by `authenticate`. */
export function callerOf(request: FastifyRequest): AgentRow {
  if (!request.agent) throw new Error('route is missing the authenticate guard');
  return request.agent;
}

/**
 * X-API-Key authentication. Order matters and follows the spec: no keys on the server
 * at all is 503; a missing or unknown key is 401.
 */
export function createAuthGuards(store: Store, onboarder: Pick<Onboarder, 'ready'>) {
  const authenticate: onRequestAsyncHookHandler = async (request) => {
    const key = request.headers['x-api-key'];
    const given = typeof key === 'string' && key.length > 0;
    // One query for a known key (every authenticated request); the 503 is looked for only
    // when the key is missing or unknown, where it takes precedence over the 401.
    const agent = given ? await store.agents.findByKeyHash(hashApiKey(key)) : undefined;
    if (!agent) {
      if (!(await store.agents.hasAnyApiKey())) {
        throw new HttpError(
          503,
          'no API keys are configured on this server yet: register an agent first',
        );
      }
      if (!given) throw new HttpError(401, 'missing API key: send it in the X-API-Key header');
      throw new HttpError(401, 'invalid API key');
    }
    // An agent registered a moment ago is answered once its wallet is funded.
    const { funding, ...row } = agent;
    await onboarder.ready(agent.agent_id, funding);
    request.agent = row;
  };

  /** 403 unless the authenticated caller's tier is at least `minimum`. Runs after `authenticate`. */
  const requireTier =
    (minimum: Tier): onRequestAsyncHookHandler =>
    async (request) => {
      const agent = callerOf(request);
      if (!tierAtLeast(agent.tier, minimum)) {
        throw new HttpError(
          403,
          `this action needs tier ${minimum} or higher; this agent is ${agent.tier}`,
        );
      }
    };

  return { authenticate, requireTier };
}
export type AuthGuards = ReturnType<typeof createAuthGuards>;

/** The admin token as the sandbox keeps it: a SHA-256 hash, hex (the token itself is never stored). */
export function hashAdminToken(token: string): string {
  return createHash('sha256').update(token).digest('hex');
}

/** Guard for the sandbox admin API: header X-Admin-Token, its hash compared in constant time. */
export function createAdminGuard(adminTokenHash: string): onRequestAsyncHookHandler {
  const expected = Buffer.from(adminTokenHash, 'hex');
  return async (request) => {
    const given = request.headers['x-admin-token'];
    if (typeof given !== 'string' || given.length === 0) {
      throw new HttpError(401, 'missing admin token: send it in the X-Admin-Token header');
    }
    if (!timingSafeEqual(createHash('sha256').update(given).digest(), expected)) {
      throw new HttpError(401, 'invalid admin token');
    }
  };
}
