import { readFileSync } from 'node:fs';
import type { Socket } from 'node:net';
import type { FastifyInstance } from 'fastify';
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
 * anvil's pipes and its pooled RPC connections, worker threads, stdio.
 */
export const RESERVED_FILE_DESCRIPTORS = 128;
const MIN_CONNECTIONS = 16;

/** The process's soft limit on open files (`ulimit -n`), where the platform says it. */
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
      `the open-file limit (ulimit -n) is ${fileLimit}, too low for agentctl serve: it needs at least ${RESERVED_FILE_DESCRIPTORS + MIN_CONNECTIONS}; raise it with ulimit -n`,
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
      requestTimeout: limits.requestTimeoutMs,
      headersTimeout: headersTimeout(limits),
      connectionsCheckingInterval: TIMEOUT_CHECK_INTERVAL_MS,
    },
  };
}

function headersTimeout(limits: ConnectionLimits): number {
  return Math.min(HEADERS_TIMEOUT_MS, limits.requestTimeoutMs);
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

  let refusedSinceLog = 0;
  let lastRefusalLog = 0;
  server.on('drop', () => {
    refusedSinceLog++;
    const now = Date.now();
    if (now - lastRefusalLog < 1_000) return;
    app.log.warn(
      { refused: refusedSinceLog, maxConnections: limits.maxConnections },
      'connections refused: the connection cap is reached',
    );
    lastRefusalLog = now;
    refusedSinceLog = 0;
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
  server.on('request', (request: { socket: TimedSocket }) => {
    clearTimeout(request.socket[firstRequestTimer]);
  });

  let closing = false;
  let inFlight = 0;
  let grace: NodeJS.Timeout | undefined;
  const closeConnectionsOnceDrained = () => {
    if (closing && inFlight === 0) server.closeAllConnections();
  };
  app.addHook('onRequest', (_request, reply, done) => {
    if (closing) {
      reply
        .code(503)
        .header('connection', 'close')
        .send({ error: 'the sandbox is shutting down; retry once it has restarted' });
      return;
    }
    inFlight++;
    reply.raw.once('close', () => {
      inFlight--;
      closeConnectionsOnceDrained();
    });
    done();
  });
  app.addHook('onSend', (_request, reply, payload, done) => {
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
