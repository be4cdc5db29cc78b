import type { DocumentNode, ExecutionResult } from 'graphql';
import type { WebSocket } from 'ws';
import type { GraphqlLimits } from '../../api/schemas/index.ts';
import { graphqlError } from './errors.ts';

/**
 * Subscriptions' plumbing: the WebSockets, what may be sent to them, their subscriptions, and
 * topics to publish on. The protocol itself (graphql-transport-ws) is socket.ts's.
 *
 * - Every frame to a socket leaves through send(): a socket whose unsent bytes would pass
 *   maxBufferedBytes, whatever the frame (a pong, an acknowledgement, an event), is closed with
 *   4499 and nothing more is queued for it. A client that stops reading costs at most that.
 * - Subscriptions with the same topic, document, variables and operation are one group: an
 *   event is executed once per group and serialised once, and each socket gets its members'
 *   frames in one write, a slice of sockets at a time so that a large fan-out never holds the
 *   event loop. A topic's events go out in order, at most maxQueuedEvents waiting.
 * - Topics are per vault (`vault:0x…`, `transactions:0x…`) plus `transactions:*`, so a
 *   publish touches only the groups it is for.
 * - What groups keep is bounded in bytes (maxLiveDocumentBytes): each group's key (the
 *   document's text and its variables) and its parsed document, as heldBytes estimates it.
 *   A new distinct subscription past it is refused.
 */

/** The WebSocket close codes of graphql-transport-ws, and ours. */
export const CLOSE = {
  badRequest: 4400,
  unauthorised: 4401,
  forbidden: 4403,
  initTimeout: 4408,
  subscriberExists: 4409,
  tooManyInits: 4429,
  /** Ours: over the rate tier's limit (HTTP's 429, times ten). */
  rateLimited: 4290,
  /** Ours: the client does not read what it is sent (past maxBufferedBytes unsent). */
  tooSlow: 4499,
} as const;

export interface SocketState {
  socket: WebSocket;
  /** The API key the socket's requests count against (connection_init's, else the upgrade's). */
  key: unknown;
  /** Whether connection_ack has been sent: until then the init timeout closes the socket. */
  acknowledged: boolean;
  /** Its subscriptions, by id. */
  subscriptions: Map<string, Member>;
  /** Whether it was closed by the server: nothing more is sent to it. */
  closing: boolean;
  /** Set when its upgrade was over its tier's limit: the seconds to wait. */
  overLimit?: number | undefined;
}

/** One subscription: a socket's id in a group. */
interface Member {
  state: SocketState;
  id: string;
  /** `{"id":…,"type":"next","payload":` with the id as JSON: the frame's start. */
  prefix: Buffer;
  group: Group;
  end(): void;
}

interface Group {
  key: string;
  topic: string;
  document: DocumentNode;
  variables: Record<string, unknown> | undefined;
  operationName: string | undefined;
  bytes: number;
  members: Set<Member>;
}

/** A subscription's execution arguments, as socket.ts checked them. */
export interface Operation {
  topic: string;
  /** The document's text: with the variables and the operation name, the group's key. */
  source: string;
  document: DocumentNode;
  variables: Record<string, unknown> | undefined;
  operationName: string | undefined;
}

export interface LiveOptions {
  limits: GraphqlLimits;
  /** Runs a group's selection on an event: once per group and event. */
  execute(
    operation: Omit<Operation, 'topic' | 'source'>,
    payload: unknown,
    shared: object,
  ): Promise<ExecutionResult> | ExecutionResult;
  /** The answer of an execution as it is sent (errors in the standard shape). */
  format(result: ExecutionResult): unknown;
  log: { warn(message: string): void; info(object: object, message: string): void };
}

/**
 * What a Subscription field's subscribe answers: the topic its events are published on
 * (socket.ts reads it; graphql-js wants an async iterable there).
 */
export interface TopicStream extends AsyncIterable<never> {
  topic: string;
}
export function topicStream(topic: string): TopicStream {
  return {
    topic,
    [Symbol.asyncIterator]: () => ({ next: async () => ({ value: undefined, done: true }) }),
  };
}

/** The TCP socket under a WebSocket (ws keeps it as `_socket`), to batch its writes. */
function netSocketOf(socket: WebSocket): { cork(): void; uncork(): void } | undefined {
  const stream = (socket as unknown as { _socket?: { cork?: unknown; uncork?: unknown } })._socket;
  return typeof stream?.cork === 'function' && typeof stream.uncork === 'function'
    ? (stream as { cork(): void; uncork(): void })
    : undefined;
}

/**
 * About the bytes V8 holds for `value`, a parsed document (plain objects, arrays and strings;
 * each object counted once, so a located document's token list is counted, not looped on):
 * an object's header and its properties, an array's header and its slots, a string's header
 * and its characters. A parsed document is up to about 50 times its text, so its text is no
 * measure of it.
 */
export function heldBytes(value: unknown): number {
  let bytes = 0;
  const seen = new Set<object>();
  const pending: unknown[] = [value];
  while (pending.length > 0) {
    const item = pending.pop();
    if (typeof item === 'string') bytes += 20 + item.length;
    if (typeof item !== 'object' || item === null || seen.has(item)) continue;
    seen.add(item);
    const values = Array.isArray(item) ? item : Object.values(item);
    bytes += (Array.isArray(item) ? 32 : 40) + 8 * values.length;
    pending.push(...values);
  }
  return bytes;
}

/** Frames sent between two turns of the event loop (a socket's are never split). */
const SLICE = 1024;

export function createLive(options: LiveOptions) {
  const { limits } = options;
  const sockets = new Map<WebSocket, SocketState>();
  const topics = new Map<string, Map<string, Group>>();
  /** Per topic, its events being executed or sent, in order. */
  const queues = new Map<string, { tail: Promise<void>; pending: number }>();
  let documentBytes = 0;
  let subscriptions = 0;
  let dropped = 0;
  let published = 0;

  /** Takes a new WebSocket; the init timeout runs from here. */
  function accept(socket: WebSocket, key: unknown): SocketState {
    const state: SocketState = {
      socket,
      key,
      acknowledged: false,
      subscriptions: new Map(),
      closing: false,
    };
    sockets.set(socket, state);
    const timer = setTimeout(() => {
      if (!state.acknowledged) close(state, CLOSE.initTimeout, 'Connection initialisation timeout');
    }, limits.connectionInitTimeoutMs);
    timer.unref();
    socket.on('close', () => {
      clearTimeout(timer);
      sockets.delete(socket);
      for (const member of [...state.subscriptions.values()]) member.end();
    });
    return state;
  }

  /** Closes `state`'s socket with `code`; nothing more is sent to it. */
  function close(state: SocketState, code: number, reason: string): void {
    if (state.closing) return;
    state.closing = true;
    sockets.delete(state.socket);
    for (const member of [...state.subscriptions.values()]) member.end();
    state.socket.close(code, reason);
  }

  /**
   * Sends `text` to `state`'s socket, unless its unsent bytes would pass the bound: then the
   * socket is closed with 4499 (its close frame waits behind what is unsent; ws destroys a
   * socket whose close is not answered in 30 s). Whether the frame was queued.
   */
  function send(state: SocketState, frame: string | Buffer | Buffer[]): boolean {
    const bytes =
      typeof frame === 'string'
        ? Buffer.byteLength(frame)
        : Array.isArray(frame)
          ? frame.reduce((sum, part) => sum + part.length, 0)
          : frame.length;
    if (state.closing || state.socket.readyState !== state.socket.OPEN) return false;
    if (state.socket.bufferedAmount + bytes > limits.maxBufferedBytes) {
      dropped++;
      options.log.info(
        { unsent: state.socket.bufferedAmount },
        'a GraphQL WebSocket was closed: its client does not read what it is sent',
      );
      close(state, CLOSE.tooSlow, `Too slow: more than ${limits.maxBufferedBytes} bytes unsent`);
      return false;
    }
    if (
      !state.acknowledged &&
      typeof frame === 'string' &&
      frame.startsWith('{"type":"connection_ack"')
    ) {
      state.acknowledged = true;
    }
    if (Array.isArray(frame)) {
      frame.forEach((part, i) => {
        state.socket.send(part, { binary: false, fin: i === frame.length - 1 });
      });
    } else state.socket.send(frame, { binary: false });
    return true;
  }

  /** Whether `state`'s socket may hold one more subscription. */
  const hasRoom = (state: SocketState) =>
    state.subscriptions.size < limits.maxSubscriptionsPerSocket;
  const fullError = () =>
    graphqlError(
      'BAD_USER_INPUT',
      `at most ${limits.maxSubscriptionsPerSocket} subscriptions at once on one connection; complete one first, or open another connection`,
    );

  /**
   * Adds `id` of `state`'s socket to the group of `operation` (made if new), and answers an
   * iterator that yields nothing and is done once the subscription ends: the hub sends its
   * events. Throws a GraphQL error when the socket is full, or the server holds as many
   * distinct documents as it may.
   */
  function join(
    state: SocketState,
    id: string,
    operation: Operation,
  ): AsyncIterableIterator<never> {
    // Closed while the subscribe was checked: its close ended what it had, and would not end
    // this one.
    if (state.closing || !sockets.has(state.socket)) {
      throw graphqlError('BAD_USER_INPUT', 'the connection is closing');
    }
    if (!hasRoom(state)) throw fullError();
    // Every member stays in its socket's map until it ends (so the socket's close ends it, and
    // hasRoom counts it): a second with the same id is refused, never put in its place.
    if (state.subscriptions.has(id)) {
      throw graphqlError('BAD_USER_INPUT', `a subscription with id ${id} is already live`);
    }
    const key = JSON.stringify([
      operation.source,
      operation.variables ?? null,
      operation.operationName ?? null,
    ]);
    let groups = topics.get(operation.topic);
    let group = groups?.get(key);
    if (!group) {
      const bytes = heldBytes(key) + heldBytes(operation.document);
      if (documentBytes + bytes > limits.maxLiveDocumentBytes) {
        throw graphqlError(
          'RATE_LIMITED',
          'the server holds as many distinct subscriptions as it may; subscribe to a document others use, or retry later',
          { retryAfter: 60 },
        );
      }
      documentBytes += bytes;
      group = {
        key,
        topic: operation.topic,
        document: operation.document,
        variables: operation.variables,
        operationName: operation.operationName,
        bytes,
        members: new Set(),
      };
      if (!groups) {
        groups = new Map();
        topics.set(operation.topic, groups);
      }
      groups.set(key, group);
    }
    let finish: ((result: IteratorResult<never>) => void) | undefined;
    let ended = false;
    const member: Member = {
      state,
      id,
      prefix: Buffer.from(`{"id":${JSON.stringify(id)},"type":"next","payload":`),
      group,
      end() {
        if (ended) return;
        ended = true;
        subscriptions--;
        if (state.subscriptions.get(id) === member) state.subscriptions.delete(id);
        group.members.delete(member);
        if (group.members.size === 0) {
          documentBytes -= group.bytes;
          const members = topics.get(group.topic);
          members?.delete(group.key);
          if (members?.size === 0) topics.delete(group.topic);
        }
        finish?.({ value: undefined, done: true });
      },
    };
    group.members.add(member);
    state.subscriptions.set(id, member);
    subscriptions++;
    const done = new Promise<IteratorResult<never>>((resolve) => {
      finish = resolve;
    });
    return {
      next: () => (ended ? Promise.resolve({ value: undefined, done: true }) : done),
      return: () => {
        member.end();
        return Promise.resolve({ value: undefined, done: true });
      },
      [Symbol.asyncIterator]() {
        return this;
      },
    };
  }

  /** Whether anyone listens on `topic` (so that nothing is built for no one). */
  const listened = (topic: string) => topics.has(topic);
  /** Whether anyone listens on a topic that starts with `prefix`. */
  const listenedUnder = (prefix: string) => [...topics.keys()].some((t) => t.startsWith(prefix));

  /**
   * Hands `payload` to every group on `topic`, without waiting: once the topic's earlier events
   * are out, each group executes it once, and every socket gets its members' frames in one
   * write, a slice of sockets at a time. `shared` is the context every group's execution of
   * one event shares (what it reads, it reads once).
   */
  function publish(topic: string, payload: unknown, shared: object = {}): void {
    if (!topics.has(topic)) return;
    let queue = queues.get(topic);
    if (!queue) {
      queue = { tail: Promise.resolve(), pending: 0 };
      queues.set(topic, queue);
    }
    if (queue.pending >= limits.maxQueuedEvents) {
      options.log.warn(`GraphQL events on ${topic} fell ${queue.pending} behind; one was skipped`);
      return;
    }
    const current = queue;
    current.pending++;
    current.tail = current.tail
      .then(() => deliver(topic, payload, shared))
      .catch((error: unknown) => options.log.warn(`a GraphQL event was not sent: ${String(error)}`))
      .finally(() => {
        current.pending--;
        if (current.pending === 0 && queues.get(topic) === current) queues.delete(topic);
      });
  }

  async function deliver(topic: string, payload: unknown, shared: object): Promise<void> {
    const bySocket = new Map<SocketState, Array<{ member: Member; body: Buffer }>>();
    for (const group of [...(topics.get(topic)?.values() ?? [])]) {
      const result = await options.execute(group, payload, shared);
      const body = Buffer.from(`${JSON.stringify(options.format(result))}}`);
      for (const member of group.members) {
        let frames = bySocket.get(member.state);
        if (!frames) {
          frames = [];
          bySocket.set(member.state, frames);
        }
        frames.push({ member, body });
      }
    }
    let inSlice = 0;
    for (const [state, frames] of bySocket) {
      if (inSlice >= SLICE) {
        await new Promise((resolve) => setImmediate(resolve));
        inSlice = 0;
      }
      inSlice += frames.length;
      // ws writes each frame at once: corked, the socket's frames leave in one write.
      const stream = netSocketOf(state.socket);
      stream?.cork();
      for (const { member, body } of frames) {
        // The frame is the member's prefix and the shared body, sent as two fragments of one
        // message: the body is never copied per member.
        if (member.group.members.has(member) && send(state, [member.prefix, body])) published++;
      }
      stream?.uncork();
    }
  }

  /** Sends a protocol ping to every acknowledged socket (the server's keep-alive). */
  function pingAll(): void {
    for (const state of [...sockets.values()]) {
      if (state.acknowledged) send(state, '{"type":"ping"}');
    }
  }

  /** Closes every socket with `code` (a restore: what they were told no longer holds). */
  function closeAll(code: number, reason: string): void {
    for (const state of [...sockets.values()]) close(state, code, reason);
  }

  return {
    accept,
    close,
    closeAll,
    send,
    join,
    hasRoom,
    fullError,
    publish,
    pingAll,
    listened,
    listenedUnder,
    /** For /sandbox/info and the benchmark. */
    stats: () => {
      let groups = 0;
      for (const set of topics.values()) groups += set.size;
      return {
        sockets: sockets.size,
        subscriptions,
        distinct_subscriptions: groups,
        events_sent: published,
        dropped,
      };
    },
  };
}
export type Live = ReturnType<typeof createLive>;
