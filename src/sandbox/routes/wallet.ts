import { type Address, formatEther } from 'viem';
import { z } from 'zod';
import {
  Eligibility,
  ErrorBody,
  FaucetCooldown,
  FaucetSuccess,
  IdempotentWriteHeaders,
  NftHoldings,
  WalletAddressBody,
  WalletStatus,
} from '../../api/schemas/index.ts';
import { dripFromFaucet, FAUCET_DRIP_WEI, GAS_THRESHOLD_WEI } from '../chain/agent-wallets.ts';
import { formatUsdc } from '../chain/vaults.ts';
import {
  indexedAgentPassesOf,
  indexedBalances,
  indexedPositions,
  indexedStrategyCount,
  indexedVotesCastBy,
  readPartA,
} from '../indexer/part-a-reads.ts';
import { createKeyedLock } from '../keyed-lock.ts';
import { callerOf } from '../plugins/auth.ts';
import { byAgent } from '../plugins/idempotency.ts';
import type { App, RouteDeps } from './types.ts';

/** The faucet's cooldown after a confirmed drip. */
export const FAUCET_COOLDOWN_SECONDS = 24 * 3600;

export function registerWalletRoutes(
  app: App,
  { store, clock, limits, auth, chain, index, onboarder, keys }: RouteDeps,
): void {
  const positionsOf = (owner: Address) =>
    readPartA(index.view, (sql) => indexedPositions(sql, chain.deployment, index.now(), owner));
  const authenticatedRead = [limits.public, auth.authenticate];

  app.get(
    '/api/v1/agent/wallet',
    { schema: { response: { 200: WalletStatus } }, onRequest: authenticatedRead },
    async (request) => {
      const address = callerOf(request).agent_address as Address;
      // From the index, as every Part A read: a replica, which runs no chain, answers alike.
      const [balances, { positions }] = await Promise.all([
        readPartA(index.view, (sql) =>
          indexedBalances(sql, chain.deployment, index.checkpoint()?.number ?? 0, address),
        ),
        positionsOf(address),
      ]);
      return {
        configured: true,
        agent_address: address,
        network: chain.chainName,
        chain_id: chain.chainId,
        eth_balance: formatEther(balances.eth),
        eth_balance_wei: balances.eth.toString(),
        has_gas: balances.eth >= GAS_THRESHOLD_WEI,
        usdc_balance: Number(formatUsdc(balances.usdc)),
        usdc_balance_raw: balances.usdc.toString(),
        protocol_token_balance: formatEther(balances.tokens),
        positions,
      };
    },
  );

  // One faucet request per agent at a time: the cooldown check and the drip are atomic.
  const perAgent = createKeyedLock();
  app.post(
    '/api/v1/agent/faucet',
    {
      // 429 is the cooldown, or the rate limiter's own error body.
      schema: {
        headers: IdempotentWriteHeaders,
        response: { 200: FaucetSuccess, 429: z.union([FaucetCooldown, ErrorBody]) },
      },
      onRequest: [auth.authenticate, limits.faucet],
    },
    keys.keyed(byAgent, async (request, reply) => {
      const agent = callerOf(request);
      const address = agent.agent_address as Address;
      return perAgent(agent.agent_id, async () => {
        const last = await store.faucet.lastDripAt(agent.agent_id);
        const now = clock.nowSeconds();
        if (last !== undefined && now < last + FAUCET_COOLDOWN_SECONDS) {
          const next = last + FAUCET_COOLDOWN_SECONDS;
          reply.code(429).header('retry-after', String(next - now));
          return {
            success: false as const,
            agent_address: address,
            error: `the faucet is cooling down for this agent; try again after ${new Date(next * 1000).toISOString()}`,
            next_eligible_timestamp: next,
            seconds_remaining: next - now,
          };
        }
        const answer = (txHash: string) => ({
          success: true as const,
          agent_address: address,
          tx_hash: txHash,
          status: 'confirmed',
          drip_amount_wei: FAUCET_DRIP_WEI.toString(),
          drip_amount_eth: formatEther(FAUCET_DRIP_WEI),
        });
        const txHash = await dripFromFaucet(chain, address, async (tx, hash) => {
          await tx.faucet.recordDrip(agent.agent_id, clock.nowSeconds(), hash);
          await keys.answerOf(request).commit(tx, answer(hash));
        });
        return answer(txHash);
      });
    }),
  );

  app.get(
    '/api/v1/agent/galaxy/eligibility',
    { schema: { response: { 200: Eligibility } }, onRequest: authenticatedRead },
    async (request) => {
      const address = callerOf(request).agent_address as Address;
      const [{ positions }, strategies, votes] = await Promise.all([
        positionsOf(address),
        readPartA(index.view, (sql) => indexedStrategyCount(sql, address)),
        readPartA(index.view, (sql) => indexedVotesCastBy(sql, address)),
      ]);
      const criteria = [
        { id: 'registered', description: 'the agent is registered', met: true },
        {
          id: 'deposited',
          description: 'the agent wallet holds shares in at least one vault',
          met: positions.length > 0,
        },
        {
          id: 'strategy_submitted',
          description: 'the agent has submitted at least one strategy',
          met: strategies > 0,
        },
        {
          id: 'voted',
          description: 'the agent has voted on at least one proposal',
          met: votes > 0,
        },
      ];
      return {
        eligible: criteria.every((criterion) => criterion.met),
        agent_address: address,
        campaign: 'galaxy',
        criteria,
      };
    },
  );

  app.post(
    '/api/v1/nfts',
    {
      schema: { body: WalletAddressBody, response: { 200: NftHoldings } },
      onRequest: limits.public,
    },
    async (request) => {
      const wallet = request.body.wallet_address as Address;
      await onboarder.readyWallet(wallet);
      const nfts = await readPartA(index.view, (sql) =>
        indexedAgentPassesOf(sql, chain.deployment, wallet),
      );
      return { wallet_address: wallet, nfts, total: nfts.length };
    },
  );
}
