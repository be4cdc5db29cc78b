import type { FastifyRequest } from 'fastify';
import type { LogLevel } from '../options.ts';

/**
 * What the request log may show. It never shows headers (X-API-Key, X-Admin-Token,
 * Authorization), bodies, or a failed request's raw bytes (`rawPacket`); query values are
 * shown only for parameters known to hold no secret; and as a last line, every line is
 * scrubbed of anything shaped like an API key and of the admin token, wherever a client
 * put it (a path segment, an unknown parameter, a message that echoes input).
 */

/** Query parameters whose values are never secret, so the log may keep them. */
const PUBLIC_QUERY_PARAMETERS = new Set(['wallet', 'limit', 'offset', 'period', 'status', 'type']);
export const REDACTED = '[redacted]';
/** An API key, also percent-encoded (`agk%5F…`) as a client may send it in a URL. */
const API_KEY_SHAPE = /agk(?:_|%5[Ff])[0-9A-Za-z_%-]*/g;
/** A short admin token would make the scrub mangle ordinary words: tokens are never that short in practice. */
const MIN_SCRUBBED_TOKEN_LENGTH = 8;

/** The path as sent, with the value of every query parameter not known to be public replaced. */
export function redactUrl(url: string): string {
  const question = url.indexOf('?');
  if (question === -1) return url;
  const query = url
    .slice(question + 1)
    .split('&')
    .map((pair) => {
      const equals = pair.indexOf('=');
      const name = equals === -1 ? pair : pair.slice(0, equals);
      if (equals === -1) return pair.length > 64 ? REDACTED : pair;
      return PUBLIC_QUERY_PARAMETERS.has(name) ? pair : `${name}=${REDACTED}`;
    })
    .join('&');
  return `${url.slice(0, question)}?${query}`;
}

/** An error as the log shows it: no raw request bytes, no input echoed beyond the message. */
interface LoggedError {
  [key: string]: unknown;
  type: string;
  message: string;
  stack: string;
}

function serializeError(error: unknown): LoggedError {
  if (!(error instanceof Error)) return { type: typeof error, message: String(error), stack: '' };
  const { code, statusCode } = error as { code?: unknown; statusCode?: unknown };
  return {
    type: error.name,
    message: error.message,
    ...(code !== undefined && { code }),
    ...(statusCode !== undefined && { statusCode }),
    stack: error.stack ?? '',
    ...(error.cause !== undefined && { cause: serializeError(error.cause) }),
  };
}

export function scrubSecrets(line: string, adminToken: string | undefined): string {
  let scrubbed = line.replace(API_KEY_SHAPE, `agk_${REDACTED}`);
  if (adminToken !== undefined && adminToken.length >= MIN_SCRUBBED_TOKEN_LENGTH) {
    scrubbed = scrubbed.replaceAll(JSON.stringify(adminToken).slice(1, -1), REDACTED);
  }
  return scrubbed;
}

/** Pino options for the sandbox's JSON request log (Fastify's `logger` option). */
export function loggerOptions(
  level: LogLevel,
  stream: NodeJS.WritableStream,
  adminToken: string | undefined,
) {
  return {
    level,
    stream,
    serializers: {
      req: (request: FastifyRequest) => ({
        method: request.method,
        url: redactUrl(request.url),
        remoteAddress: request.ip,
        remotePort: request.socket?.remotePort,
      }),
      err: serializeError,
    },
    hooks: { streamWrite: (line: string) => scrubSecrets(line, adminToken) },
  };
}
