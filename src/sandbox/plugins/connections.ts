import { readFileSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { RPC_GATEWAY_CONNECTIONS } from '../chain/rpc-gateway.ts';
import { StartupError } from '../errors.ts';

/**
 * How long a connection may take and how many may be open: a client that opens sockets and
 * sends nothing, sends a body a byte at a time, or opens thousands of connections cannot
 * hold the server's sockets or file descriptors.
 */
export interface ConnectionLimits {
  /** Most client connections open at once; the kernel's connection beyond it is closed at once. */
  maxConnections: number;
  /** Time to receive a whole request, headers and body (408 after it). */
  requestTimeoutMs: number;
}

/** A connection must send a request's headers within this (or the request timeout if lower). */
export const HEADERS_TIMEOUT_MS = 10_000;
/** An idle keep-alive connection is closed after this. */
export const KEEP_ALIVE_TIMEOUT_MS = 5_000;
/** How often Node checks the timeouts above. */
const TIMEOUT_CHECK_INTERVAL_MS = 1_000;
/** At shutdown, requests still running after this lose their connection (their writes still finish). */
const SHUTDOWN_GRACE_MS = 10_000;
/**
 * File descriptors kept for everything but client sockets: SQLite, the WAL, checkpoints,
 * the pipes of anvil and its standby and their pooled RPC connections (the standby's follower
 * uses one at a time), worker threads, stdio (128), and the RPC URL's
 * relay to anvil (two for each of its RPC_GATEWAY_CONNECTIONS).
 */
export const RESERVED_FILE_DESCRIPTORS = 128 + 2 * RPC_GATEWAY_CONNECTIONS;
const MIN_CONNECTIONS = 16;

/**
 * The process's limit on open files, where the platform says it. Node raises its soft limit
 * to the hard limit at start, so this is in effect the hard limit (`ulimit -Hn`).
 */
export function openFileLimit(): number | undefined {
  try {
    const limits = readFileSync('/proc/self/limits', 'utf8');
    const soft = /^Max open files\s+(\S+)/m.exec(limits)?.[1];
    return soft === undefined || soft === 'unlimited' ? undefined : Number(soft);
  } catch {
    return undefined;
  }
}

/**
 * The connection cap that fits the open-file limit: a client socket is a file descriptor,
 * and a write must never fail half-way because sockets took the last one.
 */
export function fitConnectionCap(requested: number, fileLimit = openFileLimit()): number {
  if (fileLimit === undefined) return requested;
  const available = fileLimit - RESERVED_FILE_DESCRIPTORS;
  if (available < MIN_CONNECTIONS) {
    throw new StartupError(
      `the open-file limit is ${fileLimit}, too low for agentctl serve: it needs at least ${RESERVED_FILE_DESCRIPTORS + MIN_CONNECTIONS}; raise the hard limit (ulimit -Hn, or LimitNOFILE= in a systemd unit)`,
    );
  }
  return Math.min(requested, available);
}

/** Fastify's server options for the limits (the rest is set on the server in `registerConnectionHandling`). */
export function connectionServerOptions(limits: ConnectionLimits) {
  return {
    requestTimeout: limits.requestTimeoutMs,
    keepAliveTimeout: KEEP_ALIVE_TIMEOUT_MS,
    // The 503 while shutting down is ours, in the contract's shape (below).
    return503OnClosing: false,
    http: {
      // Node would answer a missing Host with an empty 400; the onRequest hook answers it.
      requireHostHeader: false,
      requestTimeout: limits.requestTimeoutMs,
      headersTimeout: headersTimeout(limits),
      connectionsCheckingInterval: TIMEOUT_CHECK_INTERVAL_MS,
    },
  };
}

function headersTimeout(limits: ConnectionLimits): number {
  return Math.min(HEADERS_TIMEOUT_MS, limits.requestTimeoutMs);
}

declare module 'fastify' {
  interface FastifyInstance {
    /** Resolves once no route handler is running, or after `timeoutMs`. */
    handlersDrained(timeoutMs: number): Promise<void>;
  }
}

const firstRequestTimer = Symbol('firstRequestTimer');
type TimedSocket = Socket & { [firstRequestTimer]?: NodeJS.Timeout };

/**
 * Caps connections, closes connections that never send a request, and shuts down promptly:
 * once shutdown begins, new requests get 503, every response closes its connection, and when
 * the last in-flight request has answered the remaining (idle) connections are closed, so
 * the process never waits out a keep-alive timeout.
 */
export function registerConnectionHandling(app: FastifyInstance, limits: ConnectionLimits): void {
  const server = app.server;
  server.maxConnections = limits.maxConnections;

  // At most one line a second, counting every refusal (a trailing line ends a burst).
  let refused = 0;
  let flush: NodeJS.Timeout | undefined;
  const logRefusals = () => {
    flush = undefined;
    if (refused === 0) return;
    app.log.warn(
      { refused, maxConnections: limits.maxConnections },
      'connections refused: the connection cap is reached',
    );
    refused = 0;
    flush = setTimeout(logRefusals, 1_000);
    flush.unref();
  };
  server.on('drop', () => {
    refused++;
    if (!flush) logRefusals();
  });

  // Node's headers timeout starts with a request's first byte: a socket that sends nothing
  // at all would stay open for ever. This closes it a little after Node would have answered
  // a request begun at once with 408, so a slow request still gets that answer.
  server.on('connection', (socket: TimedSocket) => {
    const timer = setTimeout(
      () => socket.destroy(),
      headersTimeout(limits) + 2 * TIMEOUT_CHECK_INTERVAL_MS,
    );
    timer.unref();
    socket[firstRequestTimer] = timer;
    socket.once('close', () => clearTimeout(timer));
  });
  const requestArrived = (request: { socket: TimedSocket }) => {
    clearTimeout(request.socket[firstRequestTimer]);
  };
  server.on('request', requestArrived);
  // A WebSocket's opening request arrives as an upgrade, not a request: its socket then lives
  // as long as the WebSocket does.
  server.on('upgrade', requestArrived);

  // Node answers an Expect other than 100-continue itself, with an empty 417.
  server.on('checkExpectation', (request: IncomingMessage, response: ServerResponse) => {
    const body = JSON.stringify({
      error: `unsupported Expect header ${JSON.stringify(String(request.headers.expect).slice(0, 100))}: only 100-continue is supported`,
    });
    response.writeHead(417, {
      'content-type': 'application/json; charset=utf-8',
      'content-length': Buffer.byteLength(body),
      connection: 'close',
    });
    response.end(body);
  });

  // Handlers still running, so shutdown can wait for them before the store and chain close
  // (a response's connection can close, by the client or the grace timer, before its handler ends).
  const running = new WeakSet<object>();
  let handlers = 0;
  const drained: Array<() => void> = [];
  app.addHook('preHandler', (request, _reply, done) => {
    // A WebSocket (GraphQL subscriptions) outlives its handler, which never sends: its
    // socket is closed at shutdown by @fastify/websocket instead.
    if (isUpgrade(request.raw)) return done();
    running.add(request);
    handlers++;
    done();
  });
  const handlerDone = (request: object) => {
    if (!running.delete(request)) return;
    handlers--;
    if (handlers === 0) for (const wake of drained.splice(0)) wake();
  };
  app.decorate('handlersDrained', (timeoutMs: number): Promise<void> => {
    if (handlers === 0) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, timeoutMs);
      timer.unref();
      drained.push(() => {
        clearTimeout(timer);
        resolve();
      });
    });
  });

  let closing = false;
  let inFlight = 0;
  let grace: NodeJS.Timeout | undefined;
  const closeConnectionsOnceDrained = () => {
    if (closing && inFlight === 0) server.closeAllConnections();
  };
  app.addHook('onRequest', (request, reply, done) => {
    if (
      request.raw.httpVersionMajor === 1 &&
      request.raw.httpVersionMinor === 1 &&
      !request.headers.host
    ) {
      reply
        .code(400)
        .header('connection', 'close')
        .send({ error: 'missing Host header (HTTP/1.1 requires one)' });
      return;
    }
    if (closing) {
      reply
        .code(503)
        .header('connection', 'close')
        .send({ error: 'the sandbox is shutting down; retry once it has restarted' });
      return;
    }
    if (isUpgrade(request.raw)) return done();
    inFlight++;
    reply.raw.once('close', () => {
      inFlight--;
      closeConnectionsOnceDrained();
    });
    done();
  });
  app.addHook('onSend', (request, reply, payload, done) => {
    handlerDone(request);
    if (closing) reply.header('connection', 'close');
    done(null, payload);
  });
  app.addHook('preClose', (done) => {
    closing = true;
    setImmediate(closeConnectionsOnceDrained);
    grace = setTimeout(() => server.closeAllConnections(), SHUTDOWN_GRACE_MS);
    grace.unref();
    done();
  });
  app.addHook('onClose', (_instance, done) => {
    clearTimeout(grace);
    done();
  });
}

/**
 * A request to open a WebSocket: an HTTP upgrade (the parser saw `Connection: upgrade`), not
 * any request that merely carries an Upgrade header, which is an ordinary request in flight.
 */
function isUpgrade(request: IncomingMessage): boolean {
  const upgrade = (request as IncomingMessage & { upgrade?: boolean }).upgrade;
  return upgrade === true && request.headers.upgrade?.toLowerCase() === 'websocket';
}
