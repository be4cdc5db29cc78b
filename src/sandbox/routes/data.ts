import type { FastifyError, FastifyReply, FastifyRequest, FastifySchemaCompiler } from 'fastify';
import type { z } from 'zod';
import {
  DATA_ERROR_CODES,
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
import { DataApiError } from '../errors.ts';
import { isConnectionFailure } from '../indexer/failure.ts';
import type { DataQueries } from '../indexer/queries.ts';
import { TooManyPointsError } from '../indexer/vaults.ts';
import { databaseUnreachableMessage, logDatabaseUnreachable } from '../plugins/errors.ts';
import type { DataCaller, DataLimitExceeded } from '../plugins/rate-limit.ts';
import type { ZodTypeProvider } from '../plugins/zod.ts';
import { hashApiKey } from '../registration.ts';
import { ANSWER_CACHE_LIMITS, createResponseCache } from './response-cache.ts';
import type { App, RouteDeps } from './types.ts';

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
export function registerDataRoutes(app: App, deps: RouteDeps): DataAccess {
  const { limits, store } = deps;
  const { queries } = deps.index;

  /** The caller's tier from an API key: a node key, an agent's API key, or none (per IP). */
  async function dataCaller(key: unknown, ip: string): Promise<DataCaller> {
    if (key === undefined) return { tier: 'public', id: ip };
    const hash = typeof key === 'string' && key.length > 0 ? hashApiKey(key) : '';
    const node = hash ? await store.nodes.findByKeyHash(hash) : undefined;
    if (node) {
      queries.nodeSeen(node.node_id);
      return { tier: 'node', id: node.node_id };
    }
    const agent = hash ? await store.agents.findByKeyHash(hash) : undefined;
    if (agent) return { tier: 'authenticated', id: agent.agent_id };
    throw new DataApiError(
      'INVALID_API_KEY',
      'the API key is neither an agent API key nor a node key; send a valid key, or none for the public tier',
    );
  }

  /** Counts one request against the caller's tier; over a limit, a RATE_LIMITED error. */
  async function countRequest(
    request: FastifyRequest,
    caller: DataCaller,
  ): Promise<DataLimitExceeded | undefined> {
    return limits.data(request, caller);
  }

  const rateLimit = async (request: FastifyRequest, reply: FastifyReply) => {
    const exceeded = await countRequest(
      request,
      await dataCaller(request.headers['x-api-key'], request.ip),
    );
    if (exceeded) {
      reply.header('retry-after', String(exceeded.retryAfter));
      throw rateLimitedError(exceeded);
    }
  };

  // Every answer but /v1/nodes is derived from the index (and agents' names): it is served
  // pre-serialised, per URL, until the index commits or an agent row changes.
  const answers = createResponseCache<string>(ANSWER_CACHE_LIMITS);
  const cached = <S extends z.ZodType>(
    request: FastifyRequest,
    reply: FastifyReply,
    schema: S,
    build: () => z.input<S> | Promise<z.input<S>>,
  ) => answers.send(reply, request.url, queries.version, async () => schema.parse(await build()));

  app.register(
    async (scope) => {
      const v1 = scope.withTypeProvider<ZodTypeProvider>();
      v1.setValidatorCompiler(dataValidator);
      v1.addHook('onRequest', rateLimit);
      v1.setErrorHandler((error: FastifyError, request, reply) => {
        if (error instanceof DataApiError) {
          if (error.code === 'INDEX_UNAVAILABLE') reply.header('retry-after', '1');
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
        // The sandbox's PostgreSQL database cannot be reached (an API key looked up on a
        // replica cut off from it): the index's unavailability, over once it is back.
        if (isConnectionFailure(error)) {
          logDatabaseUnreachable(request.log, error);
          reply.header('retry-after', '1');
          return reply
            .code(DATA_ERROR_CODES.INDEX_UNAVAILABLE)
            .send(new DataApiError('INDEX_UNAVAILABLE', databaseUnreachableMessage(error)).body());
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
          cached(request, reply, DataVaultList, () => queries.vaults(request.query)),
      );

      v1.get(
        '/vaults/:address',
        { schema: { params: VaultParams, response: { 200: DataVaultDetail } } },
        async (request, reply) =>
          cached(request, reply, DataVaultDetail, () => queries.vault(request.params.address)),
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
            return queries.history(request.params.address, period, interval);
          }),
      );

      v1.get(
        '/strategies',
        { schema: { querystring: StrategiesQuery, response: { 200: DataStrategyList } } },
        async (request, reply) =>
          cached(request, reply, DataStrategyList, () => queries.strategyList(request.query)),
      );

      v1.get(
        '/strategies/:id/performance',
        { schema: { params: StrategyParams, response: { 200: StrategyPerformance } } },
        async (request, reply) =>
          cached(request, reply, StrategyPerformance, () =>
            queries.strategyPerformance(request.params.id),
          ),
      );

      v1.get('/nodes', { schema: { response: { 200: DataNodeList } } }, () => queries.nodes());

      v1.get(
        '/protocol/stats',
        { schema: { response: { 200: ProtocolStats } } },
        async (request, reply) => cached(request, reply, ProtocolStats, queries.stats),
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
          cached(request, reply, UserTransactions, () =>
            queries.transactions(request.params.address, request.query),
          ),
      );

      v1.get(
        '/users/:address/positions',
        { schema: { params: UserParams, response: { 200: UserPositions } } },
        async (request, reply) =>
          cached(request, reply, UserPositions, () => queries.positions(request.params.address)),
      );
    },
    { prefix: '/v1' },
  );
  return { queries, dataCaller, countRequest };
}

/** What GraphQL shares with /v1: the answers, the callers' tiers and their counts. */
export interface DataAccess {
  queries: DataQueries;
  /** The tier of a request that sent `key` (undefined: none) from `ip`; a bad key throws. */
  dataCaller(key: unknown, ip: string): Promise<DataCaller>;
  countRequest(request: FastifyRequest, caller: DataCaller): Promise<DataLimitExceeded | undefined>;
}

export function rateLimitedError(exceeded: DataLimitExceeded): DataApiError {
  return new DataApiError(
    'RATE_LIMITED',
    `rate limit exceeded: at most ${exceeded.limit} requests a ${exceeded.window} in this tier; retry in ${exceeded.retryAfter} s`,
    { window: exceeded.window, limit: exceeded.limit, retryAfter: exceeded.retryAfter },
  );
}
