import { randomUUID } from 'node:crypto';
import { type Address, getAddress, type Hex, parseEther } from 'viem';
import {
  AdvanceClockRequest,
  CheckpointResult,
  ClockState,
  CreateProposalRequest,
  CreateProposalResult,
  FulfillmentDelayRequest,
  FulfillmentDelayResult,
  FundRequest,
  FundResult,
  IdempotentWriteHeaders,
  MAX_CLOCK_OFFSET_SECONDS,
  NodeRequest,
  NodeResult,
  SandboxInfo,
  SetTierRequest,
  SetTierResponse,
  StrategyStatusRequest,
  StrategyStatusResult,
} from '../../api/schemas/index.ts';
import { VERSION } from '../../version.ts';
import { type Funded, fundAddress } from '../chain/agent-wallets.ts';
import { createProposal } from '../chain/governance.ts';
import { type StrategyStatus, setStrategyStatus } from '../chain/strategies.ts';
import { setFulfillmentDelay, toUsdcRaw } from '../chain/vaults.ts';
import { HttpError } from '../errors.ts';
import { createAdminGuard } from '../plugins/auth.ts';
import { adminKeyed } from '../plugins/idempotency.ts';
import { newNodeKey } from '../registration.ts';
import type { App, RouteDeps } from './types.ts';

export interface AdminDeps {
  /** SHA-256 of the admin token, hex (hashAdminToken). */
  adminTokenHash: string;
  stateDir: string;
  /**
   * Where the state is, as /sandbox/info says it (`state_dir`), when not `stateDir`: a
   * sandbox in PostgreSQL names its database (without the password), not its writer's work dir.
   */
  stateShownAs?: string;
  persistent: boolean;
  rateLimit: boolean;
  /** What this serve is in a team sandbox: the writer (the default) or a replica. */
  role?: SandboxInfo['role'];
  /** Where the state is: SQLite (the default) or PostgreSQL. */
  database?: SandboxInfo['database'];
}

/** What the admin API reports of the rest of the service. */
export interface AdminReports {
  graphql: () => SandboxInfo['graphql'];
}

/** The sandbox admin API under /sandbox: not part of the live service. */
export function registerSandboxAdminRoutes(
  app: App,
  { store, clock, chain, index, keys }: RouteDeps,
  admin: AdminDeps,
  reports: AdminReports,
): void {
  const onRequest = createAdminGuard(admin.adminTokenHash);
  const keyed = adminKeyed(keys, admin.adminTokenHash);
  const clockState = () => ({ now: clock.nowSeconds(), offset_seconds: clock.offsetSeconds() });

  app.get('/sandbox/info', { onRequest, schema: { response: { 200: SandboxInfo } } }, async () => ({
    version: VERSION,
    role: admin.role ?? 'writer',
    database: admin.database ?? 'sqlite',
    chain_id: chain.chainId,
    rpc_url: chain.rpcUrl,
    contracts: chain.deployment,
    clock: clockState(),
    state_dir: admin.stateShownAs ?? admin.stateDir,
    persistent: admin.persistent,
    rate_limit: admin.rateLimit,
    index: (() => {
      const waits = index.waitStats();
      return {
        block_number: index.checkpoint()?.number ?? 0,
        writes_indexed: waits.writes,
        write_wait_ms_p50: waits.p50Ms,
        write_wait_ms_p99: waits.p99Ms,
      };
    })(),
    standby: chain.standby(),
    graphql: reports.graphql(),
  }));

  app.post(
    '/sandbox/clock/advance',
    {
      onRequest,
      schema: {
        headers: IdempotentWriteHeaders,
        body: AdvanceClockRequest,
        response: { 200: ClockState },
      },
    },
    keyed(async (request) => {
      const tooFar = () =>
        new HttpError(
          400,
          `seconds: the sandbox clock may run at most ${MAX_CLOCK_OFFSET_SECONDS} s ahead; it is ${clock.offsetSeconds()} s ahead now`,
        );
      if (clock.offsetSeconds() + request.body.seconds > MAX_CLOCK_OFFSET_SECONDS) throw tooFar();
      // All or nothing: the new offset commits with the block that carries the new time
      // (a block, so that views such as yield see it). It is computed in that commit, so
      // concurrent advances add up.
      const { seconds } = request.body;
      return chain.advanceTime(seconds, async (tx, blockTime) => {
        if (clock.offsetSeconds() + seconds > MAX_CLOCK_OFFSET_SECONDS) throw tooFar();
        await clock.setOffset(tx, clock.offsetSeconds() + seconds);
        // The block may carry a later time (one mined ahead over the RPC URL): the clock
        // catches up to it in this commit, before the answer is taken.
        await clock.raiseTo(tx, blockTime);
        const state = clockState();
        await keys.answerOf(request).commit(tx, state);
        return state;
      });
    }),
  );

  app.post(
    '/sandbox/checkpoint',
    { onRequest, schema: { headers: IdempotentWriteHeaders, response: { 200: CheckpointResult } } },
    // A checkpoint changes nothing a client sees: its key's answer commits after it.
    keyed(async () => {
      const block = await chain.checkpoint().catch((error: Error) => {
        throw new HttpError(503, `no checkpoint was taken: ${error.message}`);
      });
      if (block === undefined) {
        throw new HttpError(
          400,
          'this sandbox runs on an external chain (--rpc-url), which keeps its own history: there is nothing to checkpoint',
        );
      }
      return { block_number: block };
    }),
  );

  app.post(
    '/sandbox/agents/tier',
    {
      onRequest,
      schema: {
        headers: IdempotentWriteHeaders,
        body: SetTierRequest,
        response: { 200: SetTierResponse },
      },
    },
    keyed(async (request) => {
      const { wallet_address, tier } = request.body;
      await store.commitSoon(async (tx) => {
        if (!(await tx.agents.setTier(wallet_address, tier))) {
          throw new HttpError(
            404,
            `no agent has ${wallet_address} as its registered wallet or its server-side wallet`,
          );
        }
        await keys.answerOf(request).commit(tx, { wallet_address, tier });
      });
      return { wallet_address, tier };
    }),
  );

  app.post(
    '/sandbox/fund',
    {
      onRequest,
      schema: { headers: IdempotentWriteHeaders, body: FundRequest, response: { 200: FundResult } },
    },
    keyed(async (request) => {
      const { usdc, eth } = request.body;
      const address = request.body.address as Address;
      const answer = ({ usdc, eth, balances }: Funded) => ({
        address,
        usdc_tx: usdc,
        eth_tx: eth,
        usdc_balance_raw: balances.usdc.toString(),
        eth_balance_wei: balances.eth.toString(),
      });
      const funded = await fundAddress(
        chain,
        address,
        {
          usdcRaw: usdc === undefined ? undefined : toUsdcRaw(usdc),
          ethWei: eth === undefined ? undefined : parseEther(eth),
        },
        (tx, made) => keys.answerOf(request).commit(tx, answer(made)),
      );
      return answer(funded);
    }),
  );

  app.post(
    '/sandbox/proposals',
    {
      onRequest,
      schema: {
        headers: IdempotentWriteHeaders,
        body: CreateProposalRequest,
        response: { 200: CreateProposalResult },
      },
    },
    keyed(async (request) =>
      createProposal(chain, request.body.title, request.body.description, (tx, created) =>
        keys.answerOf(request).commit(tx, created),
      ),
    ),
  );

  app.post(
    '/sandbox/strategies/status',
    {
      onRequest,
      schema: {
        headers: IdempotentWriteHeaders,
        body: StrategyStatusRequest,
        response: { 200: StrategyStatusResult },
      },
    },
    keyed(async (request) => {
      const strategyId = request.body.strategy_id.toLowerCase() as Hex;
      const { status } = request.body;
      const answer = (moved: { from: StrategyStatus; txHash: Hex }) => ({
        strategy_id: strategyId,
        previous_status: moved.from,
        status,
        tx_hash: moved.txHash,
      });
      const moved = await setStrategyStatus(chain, strategyId, status, (tx, made) =>
        keys.answerOf(request).commit(tx, answer(made)),
      );
      return answer(moved);
    }),
  );

  app.post(
    '/sandbox/vaults/fulfillment-delay',
    {
      onRequest,
      schema: {
        headers: IdempotentWriteHeaders,
        body: FulfillmentDelayRequest,
        response: { 200: FulfillmentDelayResult },
      },
    },
    keyed(async (request) => {
      const { vault_id, seconds } = request.body;
      const answer = (set: { vault: Address; txHash: Hex }) => ({
        vault_id,
        vault_address: set.vault,
        fulfillment_delay: seconds,
        tx_hash: set.txHash,
      });
      const set = await setFulfillmentDelay(chain, vault_id, seconds, (tx, made) =>
        keys.answerOf(request).commit(tx, answer(made)),
      );
      return answer(set);
    }),
  );

  app.post(
    '/sandbox/nodes',
    {
      onRequest,
      schema: { headers: IdempotentWriteHeaders, body: NodeRequest, response: { 200: NodeResult } },
    },
    keyed(async (request) => {
      const key = newNodeKey();
      const nodeId = randomUUID();
      const answer = { node_id: nodeId, node_key: key.key };
      await store.commitSoon(async (tx) => {
        await tx.nodes.insert(
          {
            node_id: nodeId,
            name: request.body.name,
            operator_address: getAddress(request.body.operator_address),
            created_at: clock.nowSeconds(),
          },
          key.hash,
        );
        await keys.answerOf(request).commit(tx, answer);
      });
      return answer;
    }),
  );
}
