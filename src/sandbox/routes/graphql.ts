import { createHash } from 'node:crypto';
import websocket from '@fastify/websocket';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { execute, type GraphQLSchema, getOperationAST, specifiedRules } from 'graphql';
import { GRAPHQL_TRANSPORT_WS_PROTOCOL } from 'graphql-ws';
import mercurius from 'mercurius';
import { GRAPHQL_LIMITS, type GraphqlLimits } from '../../api/schemas/index.ts';
import { DataApiError } from '../errors.ts';
import { formatGraphqlErrors, graphqlError } from '../graphql/errors.ts';
import { GRAPHIQL_HTML } from '../graphql/graphiql.ts';
import {
  type HistorySource,
  httpOperationsRule,
  limitsRule,
  measureOperations,
} from '../graphql/limits.ts';
import { createLive, type Live } from '../graphql/live.ts';
import { publishCommits } from '../graphql/publish.ts';
import { createResolvers, createSubscribeResolver } from '../graphql/resolvers.ts';
import { SCHEMA_SDL } from '../graphql/schema.ts';
import { createSocketProtocol } from '../graphql/socket.ts';
import { type DataAccess, rateLimitedError } from './data.ts';
import { ANSWER_CACHE_LIMITS, createResponseCache } from './response-cache.ts';
import type { App, RouteDeps } from './types.ts';

/** At most this many tokens in a document: parsing stops there. */
const MAX_TOKENS = 4000;
/** The server pings every acknowledged WebSocket this often. */
const KEEP_ALIVE_MS = 30_000;

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
 * request, one WebSocket upgrade, ping or subscribe is one request. Limits are
 * GRAPHQL_LIMITS (src/api/schemas/graphql.ts), documented in docs/data-api.md.
 */
export async function registerGraphqlRoutes(
  app: App,
  deps: RouteDeps,
  data: DataAccess,
  options: GraphqlOptions,
): Promise<Live> {
  const limits: GraphqlLimits = { ...GRAPHQL_LIMITS, ...options.limits };
  // Validation is synchronous: it takes the vaults as last read, which guard() reads first
  // for a document that asks for a history (a vault's creation time does not change).
  const history: HistorySource = {
    now: () => deps.index.now(),
    createdAt: (address) =>
      data.queries
        .lastSummaries()
        .filter((vault) => address === undefined || sameAddress(vault.address, address))
        .map((vault) => vault.createdAt),
  };
  const limitsOfDocuments = limitsRule(limits, history);
  let schema: GraphQLSchema | undefined;
  const live = createLive({
    limits,
    execute: (operation, payload, shared) =>
      execute({
        schema: schema as GraphQLSchema,
        document: operation.document,
        rootValue: payload,
        contextValue: shared,
        variableValues: operation.variables,
        operationName: operation.operationName,
      }),
    format: (result) =>
      result.errors?.length
        ? formatGraphqlErrors(result, app.log, limits.maxErrors).response
        : result,
    log: app.log,
  });
  const openSocket = createSocketProtocol({
    live,
    limits,
    schema: () => schema as GraphQLSchema,
    rules: [...specifiedRules, limitsOfDocuments],
    maxTokens: MAX_TOKENS,
    subscribeResolver: createSubscribeResolver(data.queries),
    costOf: (document, operationName) => {
      const measures = measureOperations(schema as GraphQLSchema, document, limits, history);
      return (measures.find((m) => m.name === operationName) ?? measures[0])?.cost ?? 0;
    },
    callerOf: data.dataCaller,
    count: data.countRequest,
    formatErrors: (errors) => [
      ...(formatGraphqlErrors({ errors }, app.log, limits.maxErrors).response.errors ?? []),
    ],
    log: app.log,
  });
  const unpublish = publishCommits(deps.index, data.queries, live, app.log);
  // The server's keep-alive: a ping to every acknowledged socket.
  const keepAlive = setInterval(() => live.pingAll(), KEEP_ALIVE_MS);
  keepAlive.unref();
  app.addHook('onClose', async () => {
    clearInterval(keepAlive);
    unpublish();
  });

  // A query's answer depends on the index alone, as /v1's do: it is served pre-serialised, per
  // request document, until the index commits or an agent row changes. nodeStats reports live
  // nodes (GET /v1/nodes is not cached either), so a document that names it is never kept.
  const answers = createResponseCache<string>(ANSWER_CACHE_LIMITS);
  const pending = new WeakMap<FastifyRequest, { key: string; version: unknown }>();
  /** Upgrades over their tier's limit, with the seconds to wait. */
  const overLimit = new WeakMap<FastifyRequest, number>();

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
    const caller = await data.dataCaller(request.headers['x-api-key'], request.ip);
    // Every request counts, a WebSocket's upgrade too (in its IP's tier, or its X-API-Key's).
    const exceeded = await data.countRequest(request, caller);
    if (request.ws) {
      // Only graphql-transport-ws is spoken: the legacy graphql-ws protocol
      // (subscriptions-transport-ws) and any other are refused before the upgrade.
      const offered = String(request.headers['sec-websocket-protocol'] ?? '').split(',');
      if (!offered.some((name) => name.trim() === GRAPHQL_TRANSPORT_WS_PROTOCOL)) {
        throw new DataApiError(
          'INVALID_PARAMETER',
          `the WebSocket subprotocol must be ${GRAPHQL_TRANSPORT_WS_PROTOCOL} (the npm graphql-ws client's); the legacy graphql-ws protocol is not served`,
        );
      }
      // Over the limit, the socket may still name a key of its own in connection_init (a key
      // is not held to its IP's public limit); without one it is closed with 4290 then, where
      // a client sees the reason (a refused upgrade is only a failed connection).
      if (exceeded) overLimit.set(request, exceeded.retryAfter);
      return;
    }
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
    if (/\bvaultHistory\b/.test(source)) await readVaults();
    if (/\bnodeStats\b/.test(source)) return;
    // A body can be 64 KiB: the key is its digest, so that a kept answer costs its own bytes.
    const key = createHash('sha256')
      .update(`${request.method} ${request.method === 'POST' ? JSON.stringify(body) : request.url}`)
      .digest('base64');
    const version = data.queries.version();
    const kept = answers.lookup(key, version);
    if (kept) return reply.type('application/json; charset=utf-8').send(kept);
    pending.set(request, { key, version });
  }

  /**
   * Reads the vaults, for the cost of a history (see `history`). An index that cannot answer
   * is left for the query to report, in GraphQL's terms.
   */
  async function readVaults(): Promise<void> {
    try {
      await data.queries.summaries();
    } catch {
      // The query reads the vaults again, and answers the error.
    }
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
    // mercurius's GET /graphql also takes the WebSockets, run by socket.ts (graphql-ws's
    // server) rather than mercurius's own: this hook runs before @fastify/websocket's (added
    // below), which then makes the route upgrade.
    scope.addHook('onRoute', (route) => {
      if (route.url === '/graphql' && route.method === 'GET') {
        route.wsHandler = (socket, request) => openSocket(socket, request, overLimit.get(request));
      }
    });
    await scope.register(websocket, {
      options: {
        maxPayload: 4 * limits.maxQueryBytes,
        handleProtocols: (protocols) =>
          protocols.has(GRAPHQL_TRANSPORT_WS_PROTOCOL) ? GRAPHQL_TRANSPORT_WS_PROTOCOL : false,
      },
      // A socket's error is the client's doing (a frame over maxPayload, a bad frame, a reset
      // connection): logged at info, and the socket ends.
      errorHandler: (error, socket, request) => {
        request.log.info(
          { code: (error as { code?: string }).code, message: error.message },
          'a GraphQL WebSocket was closed on a client error',
        );
        socket.terminate();
      },
    });
    await scope.register(mercurius, {
      schema: SCHEMA_SDL,
      resolvers: createResolvers(data.queries),
      path: '/graphql',
      graphiql: false,
      allowBatchedQueries: false,
      validationRules: [limitsOfDocuments, httpOperationsRule],
      // mercurius would keep the ASTs of 2,048 documents (16 KiB of text is megabytes of AST),
      // bounded in entries only: a document is parsed and validated for each request instead
      // (a millisecond or two for the largest allowed), and answers are kept by answers above.
      cache: false,
      graphql: {
        parseOptions: { maxTokens: MAX_TOKENS },
        // graphql-js adds one error saying it stopped: maxErrors in all.
        validateOptions: { maxErrors: limits.maxErrors - 1 },
      },
      errorFormatter: (execution, context) =>
        formatGraphqlErrors(
          execution,
          (context.reply?.log ?? app.log) as typeof app.log,
          limits.maxErrors,
        ),
      // Not in openapi.json: GraphQL describes itself (schema.graphql, introspection).
      additionalRouteOptions: { preHandler: guard, schema: { hide: true } },
    });
    schema = scope.graphql.schema;
    // mercurius reads a GET request's operation before running it, and a document with no
    // operation by that name made it throw a TypeError (answered as a server fault).
    scope.graphql.addHook('preValidation', async (_schema, document, context) => {
      const request = (context as unknown as { reply?: FastifyReply }).reply?.request;
      if (request?.method !== 'GET') return;
      const name = (request.query as Record<string, unknown>).operationName;
      const operationName = typeof name === 'string' ? name : undefined;
      if (!getOperationAST(document, operationName)) {
        throw graphqlError(
          'BAD_USER_INPUT',
          operationName === undefined
            ? 'the document must hold one operation, or name one in operationName'
            : `the document has no operation named ${JSON.stringify(operationName)}`,
        );
      }
    });
  });
  return live;
}

const sameAddress = (a: string, b: string) => a.toLowerCase() === b.toLowerCase();

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
