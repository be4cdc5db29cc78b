import type { Address } from 'viem';
import {
  IdempotentWriteHeaders,
  LookupQuery,
  LookupResponse,
  NonceQuery,
  NonceResponse,
  RegisterRequest,
  RegisterResponse,
} from '../../api/schemas/index.ts';
import { indexedStrategyCount, readPartA } from '../indexer/part-a-reads.ts';
import { createKeyedLock } from '../keyed-lock.ts';
import { issueNonce, registerAgent } from '../registration.ts';
import { createSignerPool } from '../signatures/pool.ts';
import { createWalletAllocator } from '../wallet-allocation.ts';
import type { App, RouteDeps } from './types.ts';

export function registerAuthRoutes(
  app: App,
  { store, clock, limits, serviceDomain, chain, index, onboarder, keys }: RouteDeps,
): void {
  const perWallet = createKeyedLock();
  const signers = createSignerPool();
  const allocator = createWalletAllocator({ store, chain, index, log: app.log });
  const wallets = {
    reserve: allocator.reserve,
    addressAt: (index: number) => chain.wallet(index).address,
  };
  app.addHook('onClose', () => signers.close());
  app.get(
    '/api/v1/agent/auth/nonce',
    {
      schema: { querystring: NonceQuery, response: { 200: NonceResponse } },
      onRequest: limits.public,
    },
    async (request) => issueNonce(store, clock, request.query.wallet, serviceDomain()),
  );

  app.post(
    '/api/v1/agent/auth/register',
    {
      schema: {
        headers: IdempotentWriteHeaders,
        body: RegisterRequest,
        response: { 200: RegisterResponse },
      },
      onRequest: limits.public,
    },
    // Nobody has an API key yet: a key is the wallet's (the same string from another wallet
    // does not collide), and only a request with the very same signed body replays it.
    keys.keyed(
      (request) =>
        `wallet:${(request.body as { wallet_address: string }).wallet_address.toLowerCase()}`,
      async (request) =>
        // One registration per wallet at a time, so a duplicated request does not verify
        // its signature twice; the commit itself refuses a used nonce or a registered wallet.
        perWallet(request.body.wallet_address.toLowerCase(), () =>
          registerAgent(
            store,
            clock,
            request.body,
            wallets,
            onboarder,
            signers.signerOf,
            (tx, answer) => keys.answerOf(request).commit(tx, answer),
          ),
        ),
    ),
  );

  app.get(
    '/api/v1/agent/auth/lookup',
    {
      schema: { querystring: LookupQuery, response: { 200: LookupResponse } },
      onRequest: limits.public,
    },
    async (request) => {
      const agent = await store.agents.findByWallet(request.query.wallet);
      if (!agent) return { registered: false as const };
      return {
        registered: true as const,
        agent_name: agent.agent_name,
        tier: agent.tier,
        status: agent.status,
        // The registry's count for the agent's server-side wallet, as the index holds it.
        strategies_submitted: await readPartA(index.view, (sql) =>
          indexedStrategyCount(sql, agent.agent_address as Address),
        ),
        performance_score: agent.performance_score,
        api_key_prefix: agent.api_key_prefix,
        created_at: new Date(agent.created_at).toISOString(),
      };
    },
  );
}
