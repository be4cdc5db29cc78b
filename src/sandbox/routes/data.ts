import type { FastifyError, FastifyReply, FastifyRequest, FastifySchemaCompiler } from 'fastify';
import { getAddress } from 'viem';
import type { z } from 'zod';
import {
  DATA_ERROR_CODES,
  type DataError,
  type DataErrorCode,
  DataNodeList,
  DataStrategyList,
  DataVaultDetail,
  DataVaultList,
  HistoryQuery,
  ProtocolStats,
  StrategiesQuery,
  StrategyParams,
  StrategyPerformance,
  TransactionsQuery,
  UserParams,
  UserPositions,
  UserTransactions,
  VaultHistory,
  VaultParams,
  VaultsQuery,
} from '../../api/schemas/index.ts';
import { isUnreachable } from '../chain/errors.ts';
import { nodeList } from '../indexer/nodes.ts';
import { indexTime, isoTime, userPositions, userTransactions } from '../indexer/reads.ts';
import { protocolStats } from '../indexer/stats.ts';
import { type IndexedStrategy, indexedStrategies } from '../indexer/strategies.ts';
import {
  TooManyPointsError,
  usdOf,
  type VaultSummary,
  vaultDetail,
  vaultHistory,
  vaultItem,
  vaultSummaries,
} from '../indexer/vaults.ts';
import type { DataCaller } from '../plugins/rate-limit.ts';
import type { ZodTypeProvider } from '../plugins/zod.ts';
import { hashApiKey } from '../registration.ts';
import { createResponseCache } from './response-cache.ts';
import type { App, RouteDeps } from './types.ts';

/** An error the data API answers as `{error: {code, message, details}}`. */
export class DataApiError extends Error {
  readonly code: DataErrorCode;
  readonly details: Record<string, unknown>;
  /** Writable: Fastify sets it on validation errors. */
  statusCode: number;

  constructor(code: DataErrorCode, message: string, details: Record<string, unknown> = {}) {
    super(message);
    this.name = 'DataApiError';
    this.code = code;
    this.details = details;
    this.statusCode = DATA_ERROR_CODES[code];
  }

  body(): DataError {
    return { error: { code: this.code, message: this.message, details: this.details } };
  }
}

/**
 * Validation in the data API's words: a bad path address is INVALID_ADDRESS, any other bad
 * parameter INVALID_PARAMETER naming it in details.parameter.
 */
const dataValidator: FastifySchemaCompiler<z.ZodType> =
  ({ schema, httpPart }) =>
  (data) => {
    const result = schema.safeParse(data);
    if (result.success) return { value: result.data };
    const issue = result.error.issues[0];
    const parameter = String(issue?.path[0] ?? httpPart ?? 'request');
    const given = (data as Record<string, unknown> | undefined)?.[parameter];
    const error =
      httpPart === 'params' && parameter === 'address'
        ? new DataApiError(
            'INVALID_ADDRESS',
            `${JSON.stringify(given)} is not an address: ${issue?.message}`,
            { parameter, value: given },
          )
        : new DataApiError('INVALID_PARAMETER', issue?.message ?? 'invalid parameter', {
            parameter,
            ...(given !== undefined && { value: given }),
          });
    return { error };
  };

/**
 * Part B's REST half, under /v1, served from the index (index.db) rather than the chain: a
 * write is indexed before it is answered, other chain activity within a poll. Its own rate
 * tiers (plugins/rate-limit.ts DATA_TIERS) count apart from Part A's.
 */
export function registerDataRoutes(app: App, deps: RouteDeps): void {
  const { chain, limits, store } = deps;
  /** When each node key was last used, for /v1/nodes (kept in memory). */
  const nodeSeen = new Map<string, number>();

  /** The caller's tier from X-API-Key: a node key, an agent's API key, or none (per IP). */
  function dataCaller(request: FastifyRequest): DataCaller {
    const key = request.headers['x-api-key'];
    if (key === undefined) return { tier: 'public', id: request.ip };
    const hash = typeof key === 'string' && key.length > 0 ? hashApiKey(key) : '';
    const node = hash ? store.nodes.findByKeyHash(hash) : undefined;
    if (node) {
      nodeSeen.set(node.node_id, Date.now());
      return { tier: 'node', id: node.node_id };
    }
    const agent = hash ? store.agents.findByKeyHash(hash) : undefined;
    if (agent) return { tier: 'authenticated', id: agent.agent_id };
    throw new DataApiError(
      'INVALID_API_KEY',
      'X-API-Key is neither an agent API key nor a node key; send a valid key, or none for the public tier',
    );
  }

  const rateLimit = async (request: FastifyRequest, reply: FastifyReply) => {
    const exceeded = await limits.data(request, dataCaller(request));
    if (exceeded) {
      reply.header('retry-after', String(exceeded.retryAfter));
      throw new DataApiError(
        'RATE_LIMITED',
        `rate limit exceeded: at most ${exceeded.limit} requests a ${exceeded.window} in this tier; retry in ${exceeded.retryAfter} s`,
        { window: exceeded.window, limit: exceeded.limit, retryAfter: exceeded.retryAfter },
      );
    }
  };

  // Every answer but /v1/nodes is derived from the index (and agents' names): it is served
  // pre-serialised, per URL, until the index commits or an agent row changes.
  const answers = createResponseCache<string>({ maxEntries: 2000 });
  const answerVersion = () => `${chain.index.version()}:${store.agents.version()}`;
  const cached = <S extends z.ZodType>(
    request: FastifyRequest,
    reply: FastifyReply,
    schema: S,
    build: () => z.input<S>,
  ) => answers.send(reply, request.url, answerVersion, () => schema.parse(build()));

  const now = () => indexTime(chain.index);
  const strategies = (): IndexedStrategy[] =>
    indexedStrategies(chain.index.db, chain.deployment, now());
  function vaultAt(address: string): VaultSummary {
    const found = vaultSummaries(chain.index).find(
      (vault) => vault.address.toLowerCase() === address.toLowerCase(),
    );
    if (!found) {
      throw new DataApiError('VAULT_NOT_FOUND', `no vault at ${getAddress(address)}`, {
        address: getAddress(address),
      });
    }
    return found;
  }
  const agentNames = () => {
    const names = new Map<string, string>();
    return (owner: string) => {
      if (!names.has(owner)) {
        names.set(owner, store.agents.findByAgentAddress(owner)?.agent_name ?? '');
      }
      return names.get(owner) || null;
    };
  };

  app.register(
    async (scope) => {
      const v1 = scope.withTypeProvider<ZodTypeProvider>();
      v1.setValidatorCompiler(dataValidator);
      v1.addHook('onRequest', rateLimit);
      v1.setErrorHandler((error: FastifyError, request, reply) => {
        if (error instanceof DataApiError) {
          return reply.code(DATA_ERROR_CODES[error.code]).send(error.body());
        }
        if (error instanceof TooManyPointsError) {
          return reply.code(400).send(
            new DataApiError('INVALID_PARAMETER', error.message, {
              parameter: 'interval',
            }).body(),
          );
        }
        if (error.statusCode === 429) {
          return reply.code(429).send(new DataApiError('RATE_LIMITED', error.message).body());
        }
        if (error.statusCode !== undefined && error.statusCode >= 400 && error.statusCode < 500) {
          return reply
            .code(error.statusCode)
            .send(new DataApiError('INVALID_PARAMETER', error.message).body());
        }
        request.log.error(
          { err: error },
          isUnreachable(error) ? 'chain unreachable' : 'request failed',
        );
        return reply
          .code(500)
          .send(new DataApiError('INTERNAL_ERROR', 'internal server error').body());
      });
      v1.setNotFoundHandler({ preHandler: rateLimit }, (request, reply) => {
        const path = (request.url.split('?')[0] ?? '').slice(0, 200);
        return reply
          .code(404)
          .send(
            new DataApiError('NOT_FOUND', `no such endpoint: ${request.method} ${path}`).body(),
          );
      });

      v1.get(
        '/vaults',
        { schema: { querystring: VaultsQuery, response: { 200: DataVaultList } } },
        async (request, reply) =>
          cached(request, reply, DataVaultList, () => {
            const { riskLevel, minTvl, orderBy } = request.query;
            const all = strategies();
            const vaults = vaultSummaries(chain.index);
            const totalTvl = vaults.reduce((sum, vault) => sum + vault.tvl, 0n);
            const min = minTvl === undefined ? 0n : BigInt(minTvl);
            let items = vaults
              .filter((vault) => vault.tvl >= min)
              .map((vault) => ({ vault, item: vaultItem(vault, all) }))
              .filter(({ item }) => riskLevel === undefined || item.riskLevel === riskLevel);
            if (orderBy) items = sortVaults(items, orderBy);
            return {
              vaults: items.map(({ item }) => item),
              totalTvl: totalTvl.toString(),
              totalTvlUsd: usdOf(totalTvl),
            };
          }),
      );

      v1.get(
        '/vaults/:address',
        { schema: { params: VaultParams, response: { 200: DataVaultDetail } } },
        async (request, reply) =>
          cached(request, reply, DataVaultDetail, () =>
            vaultDetail(
              chain.index,
              vaultAt(request.params.address),
              chain.deployment.usdc,
              strategies(),
            ),
          ),
      );

      v1.get(
        '/vaults/:address/history',
        {
          schema: {
            params: VaultParams,
            querystring: HistoryQuery,
            response: { 200: VaultHistory },
          },
        },
        async (request, reply) =>
          cached(request, reply, VaultHistory, () => {
            const { period, interval } = request.query;
            return vaultHistory(chain.index, vaultAt(request.params.address), period, interval);
          }),
      );

      v1.get(
        '/strategies',
        { schema: { querystring: StrategiesQuery, response: { 200: DataStrategyList } } },
        async (request, reply) =>
          cached(request, reply, DataStrategyList, () => {
            const { status, minSharpe } = request.query;
            const agentName = agentNames();
            return {
              strategies: strategies()
                .filter((s) => s.status !== 'deprecated')
                .filter((s) => status === undefined || s.status === status)
                .filter((s) => minSharpe === undefined || s.performance.sharpeRatio >= minSharpe)
                .map((s) => ({
                  id: s.id,
                  name: s.name,
                  agentName: agentName(s.owner),
                  vault: s.vault,
                  status: s.status,
                  allocation: s.allocation,
                  apy: s.performance.apy,
                  riskScore: s.performance.riskScore,
                  sharpeRatio: s.performance.sharpeRatio,
                  maxDrawdown: s.performance.maxDrawdown,
                })),
            };
          }),
      );

      v1.get(
        '/strategies/:id/performance',
        { schema: { params: StrategyParams, response: { 200: StrategyPerformance } } },
        async (request, reply) =>
          cached(request, reply, StrategyPerformance, () => {
            const id = request.params.id.toLowerCase();
            const found = strategies().find((s) => s.id === id);
            if (!found) {
              throw new DataApiError('STRATEGY_NOT_FOUND', `no strategy ${id}`, { id });
            }
            return {
              id: found.id,
              name: found.name,
              status: found.status,
              apy: found.performance.apy,
              sharpeRatio: found.performance.sharpeRatio,
              maxDrawdown: found.performance.maxDrawdown,
              returns: found.performance.returns.map((r) => ({
                timestamp: isoTime(r.timestamp),
                value: r.value,
              })),
            };
          }),
      );

      v1.get('/nodes', { schema: { response: { 200: DataNodeList } } }, async () => ({
        nodes: await nodeList(chain, store, nodeSeen),
      }));

      v1.get(
        '/protocol/stats',
        { schema: { response: { 200: ProtocolStats } } },
        async (request, reply) =>
          cached(request, reply, ProtocolStats, () =>
            protocolStats(chain, store, vaultSummaries(chain.index), strategies()),
          ),
      );

      v1.get(
        '/users/:address/transactions',
        {
          schema: {
            params: UserParams,
            querystring: TransactionsQuery,
            response: { 200: UserTransactions },
          },
        },
        async (request, reply) =>
          cached(request, reply, UserTransactions, () => {
            const { address } = request.params;
            const { type, limit, offset } = request.query;
            const page = userTransactions(chain.index.db, address, { type, limit, offset });
            return { address: getAddress(address), ...page, limit, offset };
          }),
      );

      v1.get(
        '/users/:address/positions',
        { schema: { params: UserParams, response: { 200: UserPositions } } },
        async (request, reply) =>
          cached(request, reply, UserPositions, () => {
            const { address } = request.params;
            return {
              address: getAddress(address),
              positions: userPositions(chain.index, address),
            };
          }),
      );
    },
    { prefix: '/v1' },
  );
}

function sortVaults<T extends { vault: VaultSummary }>(items: T[], orderBy: string): T[] {
  const [field, direction] = orderBy.startsWith('created_at')
    ? ['created_at', orderBy.slice('created_at_'.length)]
    : (orderBy.split('_') as [string, string]);
  const sign = direction === 'asc' ? 1 : -1;
  const key = (vault: VaultSummary) =>
    field === 'tvl' ? Number(vault.tvl) : field === 'apy' ? vault.apy : vault.createdAt;
  // Stable: ties keep the deployment's order.
  return [...items].sort((a, b) => sign * (key(a.vault) - key(b.vault)));
}
