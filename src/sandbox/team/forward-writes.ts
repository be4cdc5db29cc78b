import type { IncomingHttpHeaders } from 'node:http';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { Agent, errors as undiciErrors, request as undiciRequest } from 'undici';
import { connectionFailureReason } from '../indexer/failure.ts';
import { redactedUrl } from '../store/postgres.ts';
import type { Sql } from '../store/sql.ts';
import { readWriter } from './writer-lock.ts';

/**
 * A read replica's writes, forwarded to the writer: a replica runs no chain, so every request
 * that writes (Part A's writes, the /sandbox admin writes, the snapshots, which the writer
 * holds) is sent on to the writer whose URL the writer recorded in the database
 * (sandbox_writer), with the method, path, query, body and the headers that matter, and the
 * writer's answer (status, headers, body) is relayed as it came. Clients behind a load balancer
 * may then send any request to any replica.
 *
 * - The writer counts the request against the client (rate limits): X-Forwarded-For gets the
 *   client's address appended; the writer must trust one proxy hop (serve --trust-proxy).
 * - The writer's URL is cached for WRITER_URL_CACHE_MS, and read again when the writer cannot
 *   be reached (a new writer may have taken over); a write is sent again to a new URL only when
 *   it never reached the old one (the connection was refused or not made).
 * - A writer that cannot be reached is answered 503 with Retry-After, at once; one that
 *   accepted the request but did not answer within `answerTimeoutMs` 504 (the write may have
 *   been made: retry with the same Idempotency-Key). Never a 500, never a hang.
 */

/** How long the writer's URL read from the database is used before it is read again. */
export const WRITER_URL_CACHE_MS = 2000;
/** The Retry-After of a 503 for a writer that cannot be reached, in seconds. */
export const WRITER_RETRY_AFTER_S = 2;

/** The request headers sent on to the writer (lowercase); the rest stay with the replica. */
const FORWARDED_REQUEST_HEADERS = [
  'accept',
  'authorization',
  'content-type',
  'idempotency-key',
  'user-agent',
  'x-admin-token',
  'x-api-key',
  'x-request-id',
];

/** Hop-by-hop headers (RFC 9110 7.6.1): never relayed. */
const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-authenticate',
  'proxy-authorization',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
]);

/** POSTs that only read: answered by the replica itself. */
const READING_POSTS = new Set(['/api/v1/positions', '/api/v1/nfts', '/graphql']);

/**
 * GETs only the writer can answer: a nonce is a row written, and its message names the
 * service's domain, which the registration is checked against on the writer. (A wallet's
 * balances are indexed: a replica answers GET /api/v1/agent/wallet itself.)
 */
const WRITER_GETS = new Set(['/api/v1/agent/auth/nonce']);

/**
 * Whether a request goes to the writer: every method that may write, but for the POSTs that
 * read (positions, NFT holdings, GraphQL); the GETs only the writer can answer (WRITER_GETS);
 * every request about snapshots (the writer's).
 */
export function isForwarded(method: string, url: string): boolean {
  const path = url.split('?')[0] ?? '';
  if (path === '/sandbox/snapshots' || path.startsWith('/sandbox/snapshots/')) return true;
  if (WRITER_GETS.has(path)) return true;
  if (method === 'GET' || method === 'HEAD' || method === 'OPTIONS') return false;
  return !(method === 'POST' && READING_POSTS.has(path));
}

export interface WriteForwardingOptions {
  /**
   * Where the writer serves, as it recorded it; undefined while no writer has (none runs, or
   * it does not listen yet). writerUrlFrom(store.sql.standalone): the standalone statements
   * give up within their timeout, so that a database that drops packets never holds a write.
   */
  writerUrl(): Promise<string | undefined>;
  /** Request bodies above this are refused with 413, as the app refuses them. */
  bodyLimit: number;
  /** How long connecting to the writer may take (default 2 s). */
  connectTimeoutMs?: number;
  /** How long the writer may take to answer, once it has the request (default 60 s). */
  answerTimeoutMs?: number;
  /** The writer URL's cache (default WRITER_URL_CACHE_MS). */
  cacheMs?: number;
}

/** The writer's URL as recorded in the sandbox_writer row of the database `sql` reads. */
export function writerUrlFrom(sql: Sql): () => Promise<string | undefined> {
  return async () => (await readWriter(sql))?.url ?? undefined;
}

/** An error whose request never reached the writer: it may be sent again, elsewhere. */
function neverSent(error: unknown): boolean {
  const code = (error as { code?: unknown }).code;
  return (
    error instanceof undiciErrors.ConnectTimeoutError ||
    code === 'ECONNREFUSED' ||
    code === 'ENOTFOUND' ||
    code === 'EAI_AGAIN' ||
    code === 'EHOSTUNREACH' ||
    code === 'ENETUNREACH'
  );
}

class BodyTooLargeError extends Error {}

/** The request's body, read whole from the socket, refused past `limit` bytes. */
async function bodyOf(request: FastifyRequest, limit: number): Promise<Buffer | undefined> {
  const declared = Number(request.headers['content-length'] ?? Number.NaN);
  if (declared > limit) throw new BodyTooLargeError();
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of request.raw) {
    size += (chunk as Buffer).length;
    if (size > limit) throw new BodyTooLargeError();
    chunks.push(chunk as Buffer);
  }
  return size === 0 && request.headers['content-length'] === undefined
    ? undefined
    : Buffer.concat(chunks);
}

function forwardedHeaders(request: FastifyRequest): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const name of FORWARDED_REQUEST_HEADERS) {
    const value = request.headers[name];
    if (typeof value === 'string') headers[name] = value;
  }
  const before = request.headers['x-forwarded-for'];
  const chain = Array.isArray(before) ? before.join(', ') : before;
  headers['x-forwarded-for'] = chain ? `${chain}, ${request.ip}` : request.ip;
  return headers;
}

function relayedHeaders(headers: IncomingHttpHeaders): Record<string, string | string[]> {
  const relayed: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value !== undefined && !HOP_BY_HOP.has(name)) relayed[name] = value;
  }
  return relayed;
}

/**
 * Registers the forwarding as the app's first onRequest hook: register it before any route,
 * so that a forwarded request meets none of the replica's own hooks (its rate limits: the
 * writer counts), and its body is read here, never parsed by the replica.
 */
export function registerWriteForwarding(app: FastifyInstance, options: WriteForwardingOptions) {
  const connectTimeoutMs = options.connectTimeoutMs ?? 2000;
  const answerTimeoutMs = options.answerTimeoutMs ?? 60_000;
  const cacheMs = options.cacheMs ?? WRITER_URL_CACHE_MS;
  const dispatcher = new Agent({
    connect: { timeout: connectTimeoutMs },
    headersTimeout: answerTimeoutMs,
    bodyTimeout: answerTimeoutMs,
    keepAliveTimeout: 4000,
  });
  app.addHook('onClose', async () => dispatcher.close());

  let cached: { url: string; until: number } | undefined;
  const writerUrl = async (fresh: boolean): Promise<string | undefined> => {
    if (!fresh && cached && cached.until > Date.now()) return cached.url;
    const url = await options.writerUrl();
    // No writer is not cached: one that starts is used at once.
    cached = url === undefined ? undefined : { url, until: Date.now() + cacheMs };
    return url;
  };

  const unavailable = (reply: FastifyReply, message: string) =>
    reply
      .code(503)
      .header('retry-after', String(WRITER_RETRY_AFTER_S))
      .send({ error: `${message}; retry shortly` });

  const send = (url: string, request: FastifyRequest, body: Buffer | undefined) =>
    undiciRequest(new URL(request.url, url), {
      method: request.method as 'POST',
      headers: forwardedHeaders(request),
      body: body ?? null,
      dispatcher,
    });

  app.addHook('onRequest', async (request, reply) => {
    if (!isForwarded(request.method, request.url)) return;
    let body: Buffer | undefined;
    try {
      body = await bodyOf(request, options.bodyLimit);
    } catch (error) {
      if (!(error instanceof BodyTooLargeError)) throw error;
      return reply
        .code(413)
        .header('connection', 'close')
        .send({
          error: `request body is too large: the limit is ${Math.round(options.bodyLimit / 1024)} KiB`,
        });
    }
    let url: string | undefined;
    try {
      url = await writerUrl(false);
    } catch (error) {
      return unavailable(
        reply,
        `where the writer serves cannot be read from the database (${connectionFailureReason(error)})`,
      );
    }
    if (url === undefined) {
      return unavailable(
        reply,
        'no writer serves this sandbox now (none has recorded its URL in the database): writes are forwarded once one does',
      );
    }
    let answer: Awaited<ReturnType<typeof undiciRequest>>;
    try {
      try {
        answer = await send(url, request, body);
      } catch (error) {
        if (!neverSent(error)) throw error;
        // A new writer may have taken over, elsewhere.
        const now = await writerUrl(true).catch(() => url);
        if (now === undefined || now === url) throw error;
        url = now;
        answer = await send(url, request, body);
      }
    } catch (error) {
      const where = redactedUrl(url);
      if (neverSent(error)) {
        cached = undefined;
        const code = (error as { code?: string }).code;
        return unavailable(
          reply,
          `the writer at ${where} cannot be reached (${code ?? (error as Error).message})`,
        );
      }
      if (
        error instanceof undiciErrors.HeadersTimeoutError ||
        error instanceof undiciErrors.BodyTimeoutError
      ) {
        return reply.code(504).send({
          error: `the writer at ${where} did not answer within ${answerTimeoutMs / 1000} s: the write may have been made; retry with the same Idempotency-Key`,
        });
      }
      cached = undefined;
      return unavailable(
        reply,
        `the writer at ${where} cannot be reached (the connection failed: ${(error as Error).message}); the write may have been made, retry with the same Idempotency-Key`,
      );
    }
    reply.code(answer.statusCode).headers(relayedHeaders(answer.headers));
    return reply.send(answer.body);
  });
}
