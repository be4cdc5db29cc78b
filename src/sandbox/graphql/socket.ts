import type { FastifyRequest } from 'fastify';
import {
  createSourceEventStream,
  type DocumentNode,
  type ExecutionArgs,
  type GraphQLError,
  type GraphQLFieldResolver,
  type GraphQLFormattedError,
  type GraphQLSchema,
  getOperationAST,
  parse,
  type ValidationRule,
  validate,
} from 'graphql';
import { makeServer, type SubscribePayload } from 'graphql-ws';
import type { WebSocket } from 'ws';
import type { GraphqlLimits } from '../../api/schemas/index.ts';
import type { DataCaller, DataLimitExceeded } from '../plugins/rate-limit.ts';
import { graphqlError } from './errors.ts';
import { CLOSE, type Live, type SocketState } from './live.ts';

/**
 * graphql-transport-ws on /graphql's WebSockets: graphql-ws's own server runs the protocol (its
 * close codes: 4400, 4401, 4403, 4409, 4429), with the sandbox's rules on top:
 *
 * - every frame leaves through the hub's bounded send (live.ts), pongs included;
 * - a message the protocol does not allow closes the socket with 4400, saying why;
 * - the socket is closed with 4408 unless connection_ack has been sent within the timeout;
 * - the upgrade counted one request (routes/graphql.ts); connection_init with a key of its own
 *   counts one in that key's tier, else it is refused with 4290 if the upgrade was over its
 *   limit; then each ping and each subscribe counts one in the socket's tier (over the limit:
 *   4290 for a ping, a RATE_LIMITED error for a subscribe), and a subscription one more per
 *   subscriptionCostPerRequest of its cost;
 * - a subscribe is checked (size, tokens, validation with the limits, one subscription
 *   operation) before it is kept; its errors are in the standard shape.
 */

/** The messages a graphql-transport-ws client may send. */
const CLIENT_MESSAGES = new Set(['connection_init', 'ping', 'pong', 'subscribe', 'complete']);

/** Why a client's graphql-transport-ws message is malformed, or undefined when it is not. */
function malformed(message: unknown): string | undefined {
  if (!isObject(message)) return 'a message must be a JSON object';
  const { type, id, payload } = message;
  if (typeof type !== 'string' || !CLIENT_MESSAGES.has(type)) return 'unknown message type';
  if (type === 'subscribe' || type === 'complete') {
    if (typeof id !== 'string' || id === '') return `${type} needs an id`;
  }
  if (!isOptional(payload, isObject)) return 'a payload must be an object';
  if (type === 'subscribe') {
    if (!isObject(payload)) return 'subscribe needs a payload';
    if (typeof payload.query !== 'string')
      return 'the query must be a GraphQL document as a string';
    if (!isOptional(payload.variables, isObject)) return 'variables must be an object';
    if (!isOptional(payload.operationName, (v) => typeof v === 'string')) {
      return 'operationName must be a string';
    }
    if (!isOptional(payload.extensions, isObject)) return 'extensions must be an object';
  }
  return undefined;
}
const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);
const isOptional = (value: unknown, ok: (value: unknown) => boolean) =>
  value === undefined || value === null || ok(value);

export interface SocketProtocolOptions {
  live: Live;
  limits: GraphqlLimits;
  /** The schema (mercurius's, once it is built). */
  schema(): GraphQLSchema;
  /** Validation rules for a subscription document (graphql-js's and the limits). */
  rules: readonly ValidationRule[];
  /** At most this many tokens in a document. */
  maxTokens: number;
  /** The cost of the operation `operationName` (or the only one) of `document`. */
  costOf(document: DocumentNode, operationName: string | undefined): number;
  /** The Subscription fields' subscribe resolver: it answers a TopicStream. */
  subscribeResolver: GraphQLFieldResolver<unknown, unknown>;
  /** The caller for an API key (throws for a key that is none). */
  callerOf(key: unknown, ip: string): Promise<DataCaller>;
  /** Counts one request of `caller`; what was exceeded, or undefined. */
  count(request: FastifyRequest, caller: DataCaller): Promise<DataLimitExceeded | undefined>;
  /** Errors as they are answered (the standard shape, at most maxErrors). */
  formatErrors(errors: readonly GraphQLError[]): GraphQLFormattedError[];
  log: { error(object: object, message: string): void };
}

interface Extra {
  state: SocketState;
  request: FastifyRequest;
  /**
   * Per id, the subscribe being checked (a token of its own). graphql-ws forgets an id once
   * it is completed, so the same id may be subscribed again while the first subscribe still
   * waits on its rate count: only the token still here when the checks end may join.
   */
  starting: Map<string, object>;
}

/** What onSubscribe hands on to subscribe(): the subscription the hub already holds. */
interface Kept {
  subscription: AsyncIterableIterator<never>;
}

export function createSocketProtocol(options: SocketProtocolOptions) {
  const { live, limits } = options;

  /** Counts one request of the socket's tier; closes it with 4290 when over. */
  async function countOrClose(state: SocketState, request: FastifyRequest): Promise<boolean> {
    const exceeded = await options.count(request, await options.callerOf(state.key, request.ip));
    if (!exceeded) return true;
    live.close(state, CLOSE.rateLimited, `Rate limited: retry in ${exceeded.retryAfter} s`);
    return false;
  }

  const server = makeServer<Record<string, unknown> | undefined, Extra>({
    // The hub's timer closes a socket that has not been acknowledged (not only one that has
    // sent nothing): graphql-ws's own is off.
    connectionInitWaitTimeout: 0,

    async onConnect(ctx) {
      const { state, request } = ctx.extra;
      const params = ctx.connectionParams ?? {};
      const headers = isObject(params.headers) ? params.headers : {};
      const given = params.apiKey ?? params['x-api-key'] ?? headers['x-api-key'];
      const key = given ?? state.key;
      try {
        await options.callerOf(key, request.ip);
      } catch (error) {
        live.close(state, CLOSE.forbidden, `Forbidden: ${(error as Error).message}`.slice(0, 120));
        return false;
      }
      // The upgrade counted in its own tier; a key sent here counts in the key's.
      if (key !== state.key) {
        state.key = key;
        return countOrClose(state, request);
      }
      if (state.overLimit !== undefined) {
        live.close(state, CLOSE.rateLimited, `Rate limited: retry in ${state.overLimit} s`);
        return false;
      }
      return true;
    },

    async onPing(ctx) {
      await countOrClose(ctx.extra.state, ctx.extra.request);
    },

    async onSubscribe(ctx, id, payload) {
      const token = {};
      ctx.extra.starting.set(id, token);
      try {
        return await check(ctx.extra, id, payload, token);
      } finally {
        if (ctx.extra.starting.get(id) === token) ctx.extra.starting.delete(id);
      }
    },

    // The hub sends the events; graphql-ws waits on the subscription until it ends.
    subscribe: (args) => (args.contextValue as Kept).subscription,

    onError: (_ctx, _id, _payload, errors) => options.formatErrors(errors),
  });

  /**
   * Checks a subscribe and, when it passes, joins it to the hub: its execution arguments, or
   * its errors. `token` is the subscribe's own (see Extra.starting).
   */
  async function check(
    extra: Extra,
    id: string,
    payload: SubscribePayload,
    token: object,
  ): Promise<ExecutionArgs | readonly GraphQLError[]> {
    const { state, request } = extra;
    const exceeded = await options.count(request, await options.callerOf(state.key, request.ip));
    if (exceeded) {
      return [
        graphqlError('RATE_LIMITED', `rate limit exceeded: retry in ${exceeded.retryAfter} s`, {
          retryAfter: exceeded.retryAfter,
        }),
      ];
    }
    const source = payload.query;
    const bytes = Buffer.byteLength(source);
    if (bytes > limits.maxQueryBytes) {
      return [
        graphqlError(
          'BAD_USER_INPUT',
          `the query is ${bytes} bytes; at most ${limits.maxQueryBytes} are allowed`,
        ),
      ];
    }
    if (!live.hasRoom(state)) return [live.fullError()];
    const schema = options.schema();
    let document: ReturnType<typeof parse>;
    try {
      document = parse(source, { maxTokens: options.maxTokens });
    } catch (error) {
      return [error as GraphQLError];
    }
    const errors = validate(schema, document, options.rules, {
      maxErrors: limits.maxErrors - 1,
    });
    if (errors.length > 0) return errors;
    const operationName = payload.operationName ?? undefined;
    const operation = getOperationAST(document, operationName);
    if (!operation) {
      return [
        graphqlError(
          'BAD_USER_INPUT',
          operationName === undefined
            ? 'the document holds several operations: name one in operationName'
            : `the document has no operation named ${JSON.stringify(operationName)}`,
        ),
      ];
    }
    if (operation.operation !== 'subscription') {
      return [
        graphqlError(
          'BAD_USER_INPUT',
          `a ${operation.operation} is not served over the WebSocket: send it over HTTP (POST /graphql)`,
        ),
      ];
    }
    // Its cost counts when it starts, one request per subscriptionCostPerRequest (the
    // subscribe above was the first).
    const caller = await options.callerOf(state.key, request.ip);
    const cost = options.costOf(document, operationName);
    for (let n = 1; n < Math.ceil(cost / limits.subscriptionCostPerRequest); n++) {
      const over = await options.count(request, caller);
      if (over) {
        return [
          graphqlError(
            'RATE_LIMITED',
            `this subscription costs ${cost}, ${Math.ceil(cost / limits.subscriptionCostPerRequest)} requests of your tier; rate limit exceeded: retry in ${over.retryAfter} s`,
            { retryAfter: over.retryAfter },
          ),
        ];
      }
    }
    const variables = (payload.variables ?? undefined) as Record<string, unknown> | undefined;
    const stream = await createSourceEventStream({
      schema,
      document,
      variableValues: variables,
      operationName,
      subscribeFieldResolver: options.subscribeResolver,
    });
    if (!('topic' in stream) || typeof stream.topic !== 'string') {
      return [...(('errors' in stream && stream.errors) || [])] as GraphQLError[];
    }
    // Completed (and perhaps subscribed again) while it was being checked: it never starts.
    if (extra.starting.get(id) !== token) {
      return [graphqlError('BAD_USER_INPUT', `${id} was completed before it started`)];
    }
    try {
      const subscription = live.join(state, id, {
        topic: stream.topic,
        source,
        // Kept while the subscription lives: without locations, it is half the size.
        document: parse(source, { maxTokens: options.maxTokens, noLocation: true }),
        variables,
        operationName,
      });
      // graphql-ws holds these arguments while the subscription lives: they name the group's
      // document (held once for all its members), never this subscribe's located parse.
      const held = state.subscriptions.get(id)?.group.document ?? document;
      return { schema, document: held, operationName, contextValue: { subscription } as Kept };
    } catch (error) {
      return [error as GraphQLError];
    }
  }

  /**
   * Runs the protocol on a socket that was just opened, for the upgrade `request`;
   * `overLimit` is the seconds to wait when the upgrade was over its tier's limit.
   */
  return function open(socket: WebSocket, request: FastifyRequest, overLimit?: number): void {
    const state = live.accept(socket, request.headers['x-api-key']);
    state.overLimit = overLimit;
    const starting = new Map<string, object>();
    const closed = server.opened(
      {
        protocol: socket.protocol,
        send: (data) => {
          live.send(state, data);
        },
        close: (code, reason) => live.close(state, code ?? 1000, reason ?? ''),
        onMessage: (handle) =>
          socket.on('message', (data: Buffer) => {
            if (state.closing) return;
            const text = String(data);
            let message: unknown;
            try {
              message = JSON.parse(text);
            } catch {
              live.close(state, CLOSE.badRequest, 'Invalid message: not JSON');
              return;
            }
            const problem = malformed(message);
            if (problem) {
              live.close(state, CLOSE.badRequest, `Invalid message: ${problem}`);
              return;
            }
            const { type, id } = message as { type: string; id?: string };
            if (type === 'complete' && id !== undefined) starting.delete(id);
            handle(text).catch((error: unknown) => {
              options.log.error({ err: error }, 'a GraphQL WebSocket message failed');
              live.close(state, 4500, 'Internal server error');
            });
          }),
        // A pong carries the ping's payload back (as graphql-ws's own server does); it is
        // bounded like every frame, and the ping was counted.
        onPing: (payload) => {
          live.send(
            state,
            JSON.stringify(payload === undefined ? { type: 'pong' } : { type: 'pong', payload }),
          );
        },
      },
      { state, request, starting },
    );
    socket.once('close', (code: number, reason: Buffer) => {
      void closed(code, String(reason));
    });
  };
}
