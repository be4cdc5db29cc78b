import type { WebSocket } from 'ws';
import type { GraphqlLimits } from '../../api/schemas/index.ts';
import type { DataCaller } from '../plugins/rate-limit.ts';
import { graphqlError, normaliseErrorFrame } from './errors.ts';

/**
 * Subscriptions' plumbing: the WebSockets, their subscriptions, and topics to publish on.
 *
 * - A socket must send connection_init within connectionInitTimeoutMs (else it is closed with
 *   4408), once (a second is closed with 4429), with a key the data API knows if it sends
 *   one (else 4403). Its tier is the key's, counted per subscribe.
 * - A socket holds at most maxSubscriptionsPerSocket subscriptions at once.
 * - Publishing never waits for a subscriber: each subscription has its own queue. A
 *   subscriber that falls behind (maxQueuedEvents waiting, or maxBufferedBytes unsent in its
 *   socket) is dropped: its socket is closed, and the others carry on.
 * - Topics are per vault (`vault:0x…`, `transactions:0x…`) plus `transactions:*`, so a
 *   publish touches only the subscribers it is for.
 */

export interface SocketState {
  socket: WebSocket;
  /** The API key connection_init sent (checked then), which its operations count against. */
  key: unknown;
  /** Ends each of its subscriptions (run when the socket closes). */
  ends: Set<() => void>;
}

interface Subscriber {
  state: SocketState;
  queue: unknown[];
  wake: ((result: IteratorResult<unknown>) => void) | undefined;
  done: boolean;
}

/** The WebSocket close codes of graphql-transport-ws, and ours for a slow subscriber. */
export const CLOSE = {
  badRequest: 4400,
  unauthorised: 4403,
  initTimeout: 4408,
  tooManyInits: 4429,
  /** Ours: connection_init was over the rate tier's limit (HTTP's 429, times ten). */
  rateLimited: 4290,
  tooSlow: 4499,
} as const;

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

export interface LiveOptions {
  limits: GraphqlLimits;
  /** The caller for an API key sent in connection_init (throws for a key that is none). */
  callerOf(key: unknown, ip: string): DataCaller;
  log: { warn(message: string): void };
}

export function createLive(options: LiveOptions) {
  const { limits } = options;
  const topics = new Map<string, Set<Subscriber>>();
  const sockets = new Map<WebSocket, SocketState>();
  let dropped = 0;
  let published = 0;

  function drop(state: SocketState, why: string): void {
    if (!sockets.has(state.socket)) return;
    dropped++;
    options.log.warn(`a GraphQL subscriber was disconnected: ${why}`);
    sockets.delete(state.socket);
    // terminate(), not close(): a close frame would queue behind what it cannot take.
    state.socket.terminate();
  }

  /** Takes a new WebSocket: its connection_init is checked here, before mercurius acts on it. */
  function accept(socket: WebSocket, ip = ''): void {
    const state: SocketState = { socket, key: undefined, ends: new Set() };
    sockets.set(socket, state);
    // mercurius sends some errors (a document that does not parse, a malformed message)
    // without a code: every error frame leaves in the standard shape.
    const send = socket.send.bind(socket) as (data: unknown, ...rest: unknown[]) => void;
    socket.send = ((data: unknown, ...rest: unknown[]) =>
      send(normaliseErrorFrame(data), ...rest)) as typeof socket.send;
    let initialised = false;
    const timer = setTimeout(() => {
      if (!initialised) socket.close(CLOSE.initTimeout, 'Connection initialisation timeout');
    }, limits.connectionInitTimeoutMs);
    timer.unref();
    // The protocol closes the socket with 4400 on a message it cannot take; mercurius would
    // answer some with an error frame holding its internals, and act on others.
    const strict = socket.protocol === 'graphql-transport-ws';
    socket.on('message', (data: Buffer, isBinary: boolean) => {
      let message: { type?: unknown; payload?: unknown };
      try {
        message = JSON.parse(isBinary ? data.toString() : String(data));
      } catch {
        if (strict) socket.close(CLOSE.badRequest, 'Invalid message: not JSON');
        return;
      }
      const problem = strict ? malformed(message) : undefined;
      if (problem) {
        socket.close(CLOSE.badRequest, `Invalid message: ${problem}`);
        return;
      }
      if (message?.type !== 'connection_init') return;
      if (initialised) {
        socket.close(CLOSE.tooManyInits, 'Too many initialisation requests');
        return;
      }
      initialised = true;
      clearTimeout(timer);
      const payload = (message.payload ?? {}) as Record<string, unknown>;
      const headers = (payload.headers ?? {}) as Record<string, unknown>;
      const key = payload.apiKey ?? payload['x-api-key'] ?? headers['x-api-key'];
      try {
        options.callerOf(key, ip);
        state.key = key;
      } catch (error) {
        socket.close(CLOSE.unauthorised, `Forbidden: ${(error as Error).message}`.slice(0, 120));
      }
    });
    socket.on('close', () => {
      clearTimeout(timer);
      sockets.delete(socket);
      for (const end of [...state.ends]) end();
    });
  }

  /** Closes a socket whose connection_init was over its tier's limit. */
  function refuseRateLimited(state: SocketState, retryAfter: number): void {
    state.socket.close(CLOSE.rateLimited, `Rate limited: retry in ${retryAfter} s`);
  }

  /** Whether `state`'s socket may hold one more subscription. */
  const hasRoom = (state: SocketState) => state.ends.size < limits.maxSubscriptionsPerSocket;
  const fullError = () =>
    graphqlError(
      'BAD_USER_INPUT',
      `at most ${limits.maxSubscriptionsPerSocket} subscriptions at once on one connection; complete one first, or open another connection`,
    );

  /**
   * A subscription of `state`'s socket to `topic`: an async iterator of what is published
   * there, until the client completes it or the socket closes.
   */
  function subscribe(state: SocketState, topic: string): AsyncIterableIterator<unknown> {
    if (!hasRoom(state)) throw fullError();
    const subscriber: Subscriber = { state, queue: [], wake: undefined, done: false };
    let set = topics.get(topic);
    if (!set) {
      set = new Set();
      topics.set(topic, set);
    }
    set.add(subscriber);
    const end = (): IteratorResult<unknown> => {
      if (!subscriber.done) {
        subscriber.done = true;
        state.ends.delete(end);
        const members = topics.get(topic);
        members?.delete(subscriber);
        if (members?.size === 0) topics.delete(topic);
        subscriber.queue.length = 0;
        subscriber.wake?.({ value: undefined, done: true });
        subscriber.wake = undefined;
      }
      return { value: undefined, done: true };
    };
    state.ends.add(end);
    return {
      next: () => {
        if (subscriber.queue.length > 0) {
          return Promise.resolve({ value: subscriber.queue.shift(), done: false });
        }
        if (subscriber.done) return Promise.resolve({ value: undefined, done: true });
        return new Promise((resolve) => {
          subscriber.wake = resolve;
        });
      },
      return: () => Promise.resolve(end()),
      [Symbol.asyncIterator]() {
        return this;
      },
    };
  }

  /** Whether anyone listens on `topic` (so that nothing is built for no one). */
  const listened = (topic: string) => (topics.get(topic)?.size ?? 0) > 0;
  /** Whether anyone listens on a topic that starts with `prefix`. */
  const listenedUnder = (prefix: string) => [...topics.keys()].some((t) => t.startsWith(prefix));

  /** Hands `payload` to every subscriber of `topic`, without waiting for any of them. */
  function publish(topic: string, payload: unknown): void {
    const set = topics.get(topic);
    if (!set) return;
    for (const subscriber of [...set]) {
      if (subscriber.done) continue;
      const { state } = subscriber;
      if (
        subscriber.queue.length >= limits.maxQueuedEvents ||
        state.socket.bufferedAmount > limits.maxBufferedBytes
      ) {
        drop(state, `it fell ${subscriber.queue.length} events behind on ${topic}`);
        continue;
      }
      published++;
      if (subscriber.wake) {
        const wake = subscriber.wake;
        subscriber.wake = undefined;
        wake({ value: payload, done: false });
      } else subscriber.queue.push(payload);
    }
  }

  return {
    accept,
    refuseRateLimited,
    subscribe,
    hasRoom,
    fullError,
    publish,
    listened,
    listenedUnder,
    stateOf: (socket: WebSocket) => sockets.get(socket),
    /** For /sandbox/info and the benchmark. */
    stats: () => {
      let subscriptions = 0;
      for (const set of topics.values()) subscriptions += set.size;
      return { sockets: sockets.size, subscriptions, events_sent: published, dropped };
    },
  };
}
export type Live = ReturnType<typeof createLive>;
