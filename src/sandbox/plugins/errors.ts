import { STATUS_CODES } from 'node:http';
import type { Duplex } from 'node:stream';
import type {
  FastifyBaseLogger,
  FastifyError,
  FastifyInstance,
  FastifyReply,
  FastifyRequest,
} from 'fastify';
import {
  ChainUnavailableError,
  ContractsMissingError,
  isMissingContract,
  isUnreachable,
} from '../chain/errors.ts';
import { HttpError } from '../errors.ts';
import { connectionFailureReason, isConnectionFailure } from '../indexer/failure.ts';

/** The Retry-After of a 503 for a database that cannot be reached, in seconds. */
export const DATABASE_RETRY_AFTER_S = 2;

/** What a client is told when the sandbox's database cannot be reached (`error` says why). */
export function databaseUnreachableMessage(error: unknown): string {
  return `the sandbox's database cannot be reached (${connectionFailureReason(error)}); retry shortly`;
}

/**
 * A log of requests that failed on a database that cannot be reached: the first in each
 * `everyMs`, with how many were not logged since the last line. An outage under load would
 * otherwise log a line per request.
 */
export function throttledUnreachableLog(everyMs: number, now: () => number = Date.now) {
  let loggedAt = Number.NEGATIVE_INFINITY;
  let unlogged = 0;
  return (log: Pick<FastifyBaseLogger, 'warn'>, error: unknown): void => {
    if (now() - loggedAt < everyMs) {
      unlogged++;
      return;
    }
    loggedAt = now();
    log.warn(
      { err: error, ...(unlogged > 0 && { not_logged_since_last: unlogged }) },
      'database unreachable',
    );
    unlogged = 0;
  };
}

/** The process's log of requests failed on an unreachable database: a line per 10 s at most. */
export const logDatabaseUnreachable = throttledUnreachableLog(10_000);

/** Fastify's own texts, reworded to say what to do. */
const FRIENDLIER: Record<string, string> = {
  FST_ERR_CTP_INVALID_MEDIA_TYPE:
    'unsupported Content-Type: send a JSON body with Content-Type: application/json',
  FST_ERR_CTP_BODY_TOO_LARGE: 'request body is too large: the limit is 64 KiB',
};

/**
 * One place decides what an error looks like on the wire: `{"error": "..."}` always.
 * Below 500, and for deliberate HttpErrors (503 with no keys, say), the message is the
 * client's to read; any other failure is logged and replaced with a generic text so
 * internals never leak.
 */
export function registerErrorHandling(app: FastifyInstance, stateDir: string): void {
  app.setErrorHandler((error: FastifyError, request, reply) => {
    // A chain read that fails because the node is down is the chain's unavailability,
    // not a bug: say so with 503.
    if (isUnreachable(error)) {
      request.log.warn({ err: error }, 'chain unreachable');
      return reply.code(503).send({ error: new ChainUnavailableError().message });
    }
    // The sandbox's PostgreSQL database cannot be reached (a replica, or a writer, whose
    // connection dropped): not a bug, and over once it is back.
    if (isConnectionFailure(error)) {
      logDatabaseUnreachable(request.log, error);
      return reply
        .code(503)
        .header('retry-after', String(DATABASE_RETRY_AFTER_S))
        .send({ error: databaseUnreachableMessage(error) });
    }
    if (isMissingContract(error)) {
      request.log.error({ err: error }, 'a contract is missing from the chain');
      return reply.code(503).send({ error: new ContractsMissingError().message });
    }
    const told = clientErrorOf(error, stateDir);
    if (!told) {
      request.log.error({ err: error }, 'request failed');
      return reply.code(500).send({ error: 'internal server error' });
    }
    return reply.code(told.status).send({ error: told.message });
  });

  // Only JSON bodies are part of the contract: anything else is 415, not parsed as a string.
  app.removeContentTypeParser('text/plain');

  app.setNotFoundHandler((request, reply) => {
    const path = (request.url.split('?')[0] ?? '').slice(0, 200);
    return reply.code(404).send({ error: `no such endpoint: ${request.method} ${path}` });
  });
}

/**
 * What the client is told of an error that is its to read: one below 500, or a deliberate
 * HttpError. Undefined for the rest (the error handler logs them and says 500, or 503 for
 * the chain). No text names a file on the server's disk, whatever a system error's says.
 */
export function clientErrorOf(
  error: unknown,
  stateDir: string,
): { status: number; message: string } | undefined {
  const failure = error as FastifyError;
  if (isUnreachable(failure) || isMissingContract(failure)) return undefined;
  const status =
    failure.statusCode !== undefined && failure.statusCode >= 400 ? failure.statusCode : 500;
  if (status >= 500 && !(error instanceof HttpError)) return undefined;
  const message = FRIENDLIER[failure.code] ?? failure.message;
  return { status, message: message.replaceAll(stateDir, 'the state directory') };
}

/** Errors Fastify raises before routing (a URL that does not decode, say), in the same shape. */
export function answerFrameworkError(
  error: FastifyError,
  _request: FastifyRequest,
  reply: FastifyReply,
): void {
  const message =
    error.code === 'FST_ERR_BAD_URL'
      ? 'the URL is not valid: percent-encode reserved characters'
      : 'the request could not be read';
  reply.code(400).send({ error: message });
}

/**
 * Answers what Node's HTTP parser refuses before Fastify sees a request (headers too large,
 * a malformed request line or header, a request not received in time) in the contract's
 * `{"error": "..."}` shape, then closes the connection. The log gets the parser's error code
 * only: the error also carries the raw request bytes, secrets included.
 */
export function handleClientError(
  this: FastifyInstance,
  error: Error & { code?: string },
  socket: Duplex,
): void {
  if (error.code === 'ECONNRESET' || socket.destroyed) return;
  // A response has begun on this connection (a bad request pipelined behind a good one):
  // an answer now would be read as part of it. Just close, as Node itself does.
  if ((socket as Duplex & { _httpMessage?: { _headerSent?: boolean } })._httpMessage?._headerSent) {
    socket.destroy();
    return;
  }
  const [status, message]: [number, string] =
    error.code === 'ERR_HTTP_REQUEST_TIMEOUT'
      ? [408, 'the request took too long to arrive; send it again']
      : error.code === 'HPE_HEADER_OVERFLOW'
        ? [431, 'request headers are too large: the limit is 16 KiB in all']
        : [400, `malformed HTTP request${error.code ? ` (${error.code})` : ''}`];
  this.log.debug({ code: error.code, status }, 'client error');
  if (socket.writable) {
    const body = JSON.stringify({ error: message });
    socket.write(
      `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: application/json; charset=utf-8\r\n` +
        `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    );
  }
  socket.destroy();
}
