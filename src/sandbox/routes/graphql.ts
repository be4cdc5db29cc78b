import websocket from '@fastify/websocket';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { GraphQLError, type GraphQLSchema, parse, specifiedRules, validate } from 'graphql';
import mercurius from 'mercurius';
import { GRAPHQL_LIMITS, type GraphqlLimits } from '../../api/schemas/index.ts';
import { DataApiError } from '../errors.ts';
import { formatGraphqlErrors, graphqlError } from '../graphql/errors.ts';
import { GRAPHIQL_HTML } from '../graphql/graphiql.ts';
import { httpOperationsRule, limitsRule } from '../graphql/limits.ts';
import { createLive, type Live, type SocketState } from '../graphql/live.ts';
import { publishCommits } from '../graphql/publish.ts';
import { createLoaders, createResolvers } from '../graphql/resolvers.ts';
import { SCHEMA_SDL } from '../graphql/schema.ts';
import { type DataAccess, rateLimitedError } from './data.ts';
import { ANSWER_CACHE_LIMITS, createResponseCache } from './response-cache.ts';
import type { App, RouteDeps } from './types.ts';

/** At most this many tokens in a document: parsing stops there. */
const MAX_TOKENS = 4000;

export interface GraphqlOptions {
  /** Serve GraphiQL to a browser at GET /graphql. */
  graphiql: boolean;
  /** Tests lower some limits (the init timeout, the subscription cap). */
  limits?: Partial<GraphqlLimits>;
}

/**
 * Part B's GraphQL half at /graphql (mercurius): queries over POST (and GET), subscriptions
 * over WebSocket with graphql-transport-ws, GraphiQL for a browser. It reads the same index
 * through the same functions as /v1, and counts against the same rate tiers: one HTTP
 * request, one WebSocket upgrade or one subscribe is one request. Limits are
 * GRAPHQL_LIMITS (src/api/schemas/graphql.ts), documented in docs/data-api.md.
 */
export async function registerGraphqlRoutes(
  app: App,
  deps: RouteDeps,
  data: DataAccess,
  options: GraphqlOptions,
): Promise<Live> {
  const limits: GraphqlLimits = { ...GRAPHQL_LIMITS, ...options.limits };
  const live = createLive({ limits, callerOf: data.dataCaller, log: app.log });
  const unpublish = publishCommits(deps.chain.index, data.queries, live);
  app.addHook('onClose', async () => unpublish());
  const rules = [...specifiedRules, limitsRule(limits)];

  // A query's answer depends on the index alone, as /v1's do: it is served pre-serialised, per
  // request document, until the index commits or an agent row changes. nodeStats reports live
  // nodes (GET /v1/nodes is not cached either), so a document that names it is never kept.
  const answers = createResponseCache<string>(ANSWER_CACHE_LIMITS);
  const pending = new WeakMap<FastifyRequest, { key: string; version: unknown }>();

  /** Rate tiers, the request's shape, and GraphiQL for a browser. */
  async function guard(request: FastifyRequest, reply: FastifyReply) {
    const query = (request.query ?? {}) as Record<string, unknown>;
    if (request.method === 'GET' && !request.ws && query.query === undefined) {
      if (options.graphiql && /text\/html/.test(request.headers.accept ?? '')) {
        return reply.type('text/html; charset=utf-8').send(GRAPHIQL_HTML);
      }
      throw new DataApiError(
        'INVALID_PARAMETER',
        'GET /graphql needs a query parameter (or use POST, or a WebSocket for subscriptions)',
      );
    }
    // A key that is none is refused here (401), a WebSocket's too.
    const caller = data.dataCaller(request.headers['x-api-key'], request.ip);
    // A WebSocket counts at its connection_init, in the tier of the key sent there.
    if (request.ws) return;
    const exceeded = await data.countRequest(request, caller);
    if (exceeded) {
      reply.header('retry-after', String(exceeded.retryAfter));
      throw rateLimitedError(exceeded);
    }
    const body = request.method === 'POST' ? request.body : query;
    if (Array.isArray(body)) {
      throw new DataApiError('INVALID_PARAMETER', 'batched operations are not supported; send one');
    }
    const source = (body as Record<string, unknown> | null | undefined)?.query;
    if (typeof source !== 'string' || source.trim() === '') {
      throw new DataApiError(
        'INVALID_PARAMETER',
        'the request needs a GraphQL document in "query" (a JSON body {"query": "…", "variables": {…}})',
      );
    }
    if (Buffer.byteLength(source) > limits.maxQueryBytes) {
      throw new DataApiError(
        'INVALID_PARAMETER',
        `the query is ${Buffer.byteLength(source)} bytes; at most ${limits.maxQueryBytes} are allowed`,
      );
    }
    // mercurius takes a query that does not parse as GraphQL for a JSON-encoded AST, which
    // then skips parsing's limits (and a JSON string crashed validation). No GraphQL document
    // is valid JSON, so a query that is JSON is refused.
    if (isJson(source)) {
      throw new DataApiError(
        'INVALID_PARAMETER',
        'the query must be a GraphQL document; a JSON value (an AST, say) is not taken',
      );
    }
    checkVariables((body as Record<string, unknown>).variables, request.method === 'GET');
    const operationName = (body as Record<string, unknown>).operationName;
    if (
      operationName !== undefined &&
      operationName !== null &&
      typeof operationName !== 'string'
    ) {
      throw new DataApiError('INVALID_PARAMETER', '"operationName" must be a string');
    }
    if (/\bnodeStats\b/.test(source)) return;
    const key = `${request.method} ${request.method === 'POST' ? JSON.stringify(body) : request.url}`;
    const version = data.queries.version();
    const kept = answers.lookup(key, version);
    if (kept) return reply.type('application/json; charset=utf-8').send(kept);
    pending.set(request, { key, version });
  }

  /** Keeps a successful answer that guard() marked as one to keep. */
  async function keepAnswer(request: FastifyRequest, reply: FastifyReply, payload: unknown) {
    const marked = pending.get(request);
    if (!marked || reply.statusCode !== 200 || typeof payload !== 'string') return payload;
    // An answer with errors is sent as it is and never kept (some are logged as they occur).
    if (!payload.includes('"errors":')) {
      answers.keep(marked.key, marked.version, data.queries.version(), Buffer.from(payload));
    }
    return payload;
  }

  await app.register(async (scope) => {
    // mercurius declares JSON schemas for its routes, which the app's zod compilers do not
    // take: guard() checks the request, and answers are GraphQL responses as they are.
    scope.setValidatorCompiler(() => (value) => ({ value }));
    scope.setSerializerCompiler(() => (value) => JSON.stringify(value));
    scope.addHook('onSend', keepAnswer);
    // Registered here, not by mercurius, to reach its server and bound a message's size.
    await scope.register(websocket, { options: { maxPayload: 4 * limits.maxQueryBytes } });
    scope.websocketServer.on('connection', (socket, raw) =>
      live.accept(socket, raw.socket.remoteAddress ?? ''),
    );
    // mercurius logs as an error every subscribe its resolver refused; a client's mistake (a
    // code given, or no field reached) is no fault of the server's, and is logged at info.
    const log = scope.log;
    scope.log = Object.assign(Object.create(log), {
      error(object: unknown, ...rest: unknown[]) {
        if (clientMistakes(object)) {
          return log.info({ errors: object.map(String) }, 'a GraphQL subscribe was refused');
        }
        return (log.error as (...args: unknown[]) => void)(object, ...rest);
      },
    });
    await scope.register(mercurius, {
      schema: SCHEMA_SDL,
      resolvers: createResolvers(data.queries, live),
      loaders: createLoaders(data.queries),
      path: '/graphql',
      graphiql: false,
      allowBatchedQueries: false,
      validationRules: [limitsRule(limits), httpOperationsRule],
      graphql: { parseOptions: { maxTokens: MAX_TOKENS } },
      errorFormatter: (execution, context) =>
        formatGraphqlErrors(execution, (context.reply?.log ?? app.log) as typeof app.log),
      // Not in openapi.json: GraphQL describes itself (schema.graphql, introspection).
      additionalRouteOptions: { preHandler: guard, schema: { hide: true } },
      subscription: {
        // Run at connection_init, before it is acknowledged: the socket counts one request
        // in the tier of the key sent there (live.accept checked it), else of the upgrade's
        // X-API-Key, else of its IP; over the limit it is closed with 4290.
        context: async (socket, request) => {
          const state = live.stateOf(socket as never);
          if (state && state.socket.readyState === state.socket.OPEN) {
            state.key ??= request.headers['x-api-key'];
            const exceeded = await data.countRequest(
              request,
              data.dataCaller(state.key, request.ip),
            );
            if (exceeded) live.refuseRateLimited(state, exceeded.retryAfter);
          }
          return { live: state };
        },
        keepAlive: 30_000,
      },
    });
    // mercurius runs no validation on a subscription: the same rules run here, before it keeps
    // anything for the subscription, and every subscribe (a bad one too) counts as a request
    // of the socket's tier, as on /v1.
    const checked = new WeakSet<object>();
    scope.graphql.addHook(
      'preSubscriptionParsing',
      async (schema: GraphQLSchema, source: string, context) => {
        checked.add(context);
        const { request, live: state } = context as unknown as {
          request: FastifyRequest;
          live?: SocketState;
        };
        const exceeded = await data.countRequest(request, data.dataCaller(state?.key, request.ip));
        if (exceeded) {
          throw graphqlError('RATE_LIMITED', rateLimitedError(exceeded).message, {
            retryAfter: exceeded.retryAfter,
          });
        }
        if (Buffer.byteLength(source) > limits.maxQueryBytes) {
          throw graphqlError(
            'BAD_USER_INPUT',
            `the query is ${Buffer.byteLength(source)} bytes; at most ${limits.maxQueryBytes} are allowed`,
          );
        }
        if (state && !live.hasRoom(state)) throw live.fullError();
        const errors = validate(schema, parse(source, { maxTokens: MAX_TOKENS }), rules);
        if (errors.length > 0) {
          const { response } = formatGraphqlErrors({ errors }, app.log);
          const first = errors[0] as GraphQLError;
          const formatted = response.errors?.[0];
          throw new GraphQLError(first.message, {
            nodes: first.nodes ?? null,
            source: first.source ?? null,
            positions: first.positions ?? null,
            path: formatted?.path ?? null,
            extensions: formatted?.extensions ?? {},
          });
        }
      },
    );
    // mercurius runs the hook above only for a query sent as a string; one sent as an object
    // (an AST) would skip the checks, so its socket is closed as a protocol error.
    scope.graphql.addHook('preSubscriptionExecution', async (_schema, _document, context) => {
      if (checked.has(context)) return;
      const state = (context as unknown as { live?: SocketState }).live;
      state?.socket.close(4400, 'the query must be a string');
      throw graphqlError('BAD_USER_INPUT', 'the query must be a GraphQL document as a string');
    });
  });
  return live;
}

/** Whether `value` is a list of GraphQL errors that are all the client's doing. */
function clientMistakes(value: unknown): value is GraphQLError[] {
  const mistake = (error: unknown) => {
    if (!(error instanceof GraphQLError)) return false;
    const code = error.extensions?.code;
    return error.path === undefined || (code !== undefined && code !== 'INTERNAL_SERVER_ERROR');
  };
  return Array.isArray(value) && value.length > 0 && value.every(mistake);
}

/**
 * `variables` must be an object (or absent, or null); over GET it is that object as JSON text.
 * graphql-js would take anything else for a server fault.
 */
function checkVariables(variables: unknown, asText: boolean): void {
  let value = variables;
  if (asText && typeof variables === 'string') {
    try {
      value = JSON.parse(variables);
    } catch {
      throw new DataApiError('INVALID_PARAMETER', '"variables" must be a JSON object');
    }
  }
  if (
    value !== undefined &&
    value !== null &&
    (typeof value !== 'object' || Array.isArray(value))
  ) {
    throw new DataApiError(
      'INVALID_PARAMETER',
      '"variables" must be an object of the variables\' values',
    );
  }
}

/** Whether `source` is a JSON value: no GraphQL document is one. */
function isJson(source: string): boolean {
  // A failed JSON.parse costs an exception: what starts as a document does (a name, a comment,
  // or a selection set opening on a field) is let through without one.
  const text = source.trim();
  if (/^(?:[A-Za-z_#]|\{\s*[^\s"}])/.test(text) && !/^(?:true|false|null)$/.test(text)) {
    return false;
  }
  try {
    JSON.parse(source);
    return true;
  } catch {
    return false;
  }
}
