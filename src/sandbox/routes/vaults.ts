import type { Address } from 'viem';
import {
  DepositRequest,
  DepositResult,
  IdempotentWriteHeaders,
  Positions,
  VaultList,
  WalletAddressBody,
  WalletPositions,
} from '../../api/schemas/index.ts';
import { type Deposit, depositToVault, formatUsdc, toUsdcRaw } from '../chain/vaults.ts';
import { indexedPositions, indexedVaults, readPartA } from '../indexer/part-a-reads.ts';
import { callerOf } from '../plugins/auth.ts';
import { byAgent } from '../plugins/idempotency.ts';
import { createResponseCache } from './response-cache.ts';
import type { App, RouteDeps } from './types.ts';

export function registerVaultRoutes(
  app: App,
  { limits, auth, chain, index, onboarder, keys }: RouteDeps,
): void {
  // Read from the index (part-a-reads.ts), as a replica, which runs no chain, reads them.
  const positionsOf = (owner: Address) =>
    readPartA(index.view, (sql) => indexedPositions(sql, chain.deployment, index.now(), owner));
  const vaultLists = createResponseCache<'vaults'>();
  app.get(
    '/api/v1/vaults',
    { schema: { response: { 200: VaultList } }, onRequest: limits.public },
    async (_request, reply) =>
      // Served pre-serialised until the index commits again: it depends on nothing else.
      vaultLists.send(reply, 'vaults', index.version, async () => {
        const vaults = await readPartA(index.view, (sql) =>
          indexedVaults(sql, chain.deployment, index.now()),
        );
        return VaultList.parse({ vaults, total: vaults.length });
      }),
  );

  app.get(
    '/api/v1/agent/vault/positions',
    { schema: { response: { 200: Positions } }, onRequest: [limits.public, auth.authenticate] },
    async (request) => {
      const { positions } = await positionsOf(callerOf(request).agent_address as Address);
      return { positions };
    },
  );

  app.post(
    '/api/v1/positions',
    {
      schema: { body: WalletAddressBody, response: { 200: WalletPositions } },
      onRequest: limits.public,
    },
    async (request) => {
      const wallet = request.body.wallet_address as Address;
      await onboarder.readyWallet(wallet);
      const { positions, totalValueRaw } = await positionsOf(wallet);
      return { wallet_address: wallet, positions, total_value_usdc: formatUsdc(totalValueRaw) };
    },
  );

  app.post(
    '/api/v1/agent/vault/deposit',
    {
      schema: {
        headers: IdempotentWriteHeaders,
        body: DepositRequest,
        response: { 200: DepositResult },
      },
      onRequest: [auth.authenticate, limits.writes],
    },
    keys.keyed(byAgent, async (request) => {
      const agent = callerOf(request);
      const { vault_id, amount_usdc } = request.body;
      const amountRaw = toUsdcRaw(amount_usdc);
      const answer = (deposit: Deposit) => ({
        success: true,
        agent_address: deposit.agentAddress,
        vault: deposit.vaultName,
        vault_address: deposit.vault,
        // At most 10^9 with 6 decimals: 15 significant digits, which a JS number holds exactly.
        amount_usdc: Number(amount_usdc),
        approve_tx: deposit.approveTx,
        deposit_tx: deposit.depositTx,
        // A request into the ERC-7540 vault waits for its fulfilment; see operator/fulfilment.ts.
        status: deposit.request ? 'pending' : 'confirmed',
        shares_balance: deposit.shares.toString(),
        ...(deposit.request && {
          request_id: deposit.request.id.toString(),
          fulfillable_at: deposit.request.fulfillableAt,
        }),
      });
      const deposit = await depositToVault(
        chain,
        agent.wallet_index,
        vault_id,
        amountRaw,
        async (tx, made) => {
          await tx.agents.recordActivity(agent.agent_id, { depositedUsdcRaw: amountRaw });
          await keys.answerOf(request).commit(tx, answer(made));
        },
      );
      return answer(deposit);
    }),
  );
}
