import type { onRequestAsyncHookHandler } from 'fastify';
import type { z } from 'zod';
import {
  DepositRequest,
  StrategySubmitRequest,
  VoteRequest,
  WalletAddressBody,
} from '../../api/schemas/index.ts';
import { HttpError } from '../errors.ts';
import type { App, RouteDeps } from './types.ts';

/**
 * The Part A endpoints that act on the chain. Until the sandbox chain lands they are
 * guarded placeholders: authentication, tier, rate limit and body validation all run for
 * real, and then the answer is 501. Nothing is recorded and no transaction is pretended.
 * The chain issue replaces each entry with a route module of its own.
 */
export function registerOnchainPendingRoutes(app: App, { limits, auth }: RouteDeps): void {
  const authenticated = [limits.public, auth.authenticate];
  const writes = [auth.authenticate, limits.writes];
  const pending: Array<{
    method: 'GET' | 'POST';
    url: string;
    onRequest: onRequestAsyncHookHandler[];
    body?: z.ZodType;
  }> = [
    { method: 'GET', url: '/api/v1/vaults', onRequest: [limits.public] },
    { method: 'GET', url: '/api/v1/proposals', onRequest: [limits.public] },
    { method: 'POST', url: '/api/v1/nfts', onRequest: [limits.public], body: WalletAddressBody },
    {
      method: 'POST',
      url: '/api/v1/positions',
      onRequest: [limits.public],
      body: WalletAddressBody,
    },
    { method: 'GET', url: '/api/v1/agent/vault/positions', onRequest: authenticated },
    { method: 'GET', url: '/api/v1/agent/strategy/list', onRequest: authenticated },
    { method: 'GET', url: '/api/v1/agent/wallet', onRequest: authenticated },
    { method: 'GET', url: '/api/v1/agent/galaxy/eligibility', onRequest: authenticated },
    {
      method: 'POST',
      url: '/api/v1/agent/vault/deposit',
      onRequest: writes,
      body: DepositRequest,
    },
    {
      method: 'POST',
      url: '/api/v1/agent/strategy/submit',
      onRequest: writes,
      body: StrategySubmitRequest,
    },
    {
      method: 'POST',
      url: '/api/v1/agent/governance/vote',
      onRequest: [...writes, auth.requireTier('established')],
      body: VoteRequest,
    },
    { method: 'POST', url: '/api/v1/agent/faucet', onRequest: [auth.authenticate, limits.faucet] },
  ];

  for (const { method, url, onRequest, body } of pending) {
    app.route({
      method,
      url,
      onRequest,
      ...(body ? { schema: { body } } : {}),
      handler: async () => {
        throw new HttpError(
          501,
          `${method} ${url} needs the sandbox chain, which this version of agentctl serve does not run yet`,
        );
      },
    });
  }
}
