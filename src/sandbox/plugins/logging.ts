import type { FastifyInstance, FastifyRequest } from 'fastify';
import { LOG_LEVEL_NAMES, type LogFormat, type LogLevel } from '../options.ts';
import { hashAdminToken } from './auth.ts';

/**
 * What the request log may show. It never shows headers (X-API-Key, X-Admin-Token,
 * Authorization), bodies, or a failed request's raw bytes (`rawPacket`); query values are
 * shown only for parameters known to hold no secret; and as a last line, every line is
 * scrubbed of anything shaped like an API key, of the admin token and of the secret parts of
 * an --rpc-url, wherever they appear (a path segment, an unknown parameter, an error message).
 */

/**
 * With the human format, one line per request, logged when the answer is sent (the human
 * stream drops Fastify's own two lines).
 */
export function registerRequestSummaries(app: FastifyInstance): void {
  app.addHook('onResponse', (request, reply, done) => {
    request.log.info(
      {
        summary: `${request.method} ${redactUrl(request.url)} ${reply.statusCode} ${Math.round(reply.elapsedTime)} ms`,
      },
      'request',
    );
    done();
  });
}

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

function serializeError(error: unknown, depth = 0): LoggedError {
  if (!(error instanceof Error)) return { type: typeof error, message: String(error), stack: '' };
  const { code, statusCode } = error as { code?: unknown; statusCode?: unknown };
  return {
    type: error.name,
    message: error.message,
    ...(code !== undefined && { code }),
    ...(statusCode !== undefined && { statusCode }),
    stack: error.stack ?? '',
    ...(error.cause !== undefined &&
      depth < 5 && { cause: serializeError(error.cause, depth + 1) }),
  };
}

/** The texts to scrub: each secret as is, as a URL would carry it, and as JSON escapes it. */
export function secretForms(secrets: Array<string | undefined>): string[] {
  const forms = new Set<string>();
  for (const secret of secrets) {
    if (secret === undefined || secret.length < MIN_SCRUBBED_TOKEN_LENGTH) continue;
    for (const form of [secret, encodeURIComponent(secret), secret.replaceAll(' ', '+')]) {
      forms.add(JSON.stringify(form).slice(1, -1));
    }
  }
  // Longest first, so a form that contains another is replaced whole.
  return [...forms].sort((a, b) => b.length - a.length);
}

/** A token as serve generates them: 24 random bytes, base64url. */
const GENERATED_TOKEN_SHAPE = /(?<![A-Za-z0-9_-])[A-Za-z0-9_-]{32}(?![A-Za-z0-9_-])/g;

export function scrubSecrets(line: string, forms: readonly string[], tokenHash?: string): string {
  let scrubbed = line.replace(API_KEY_SHAPE, `agk_${REDACTED}`);
  for (const form of forms) scrubbed = scrubbed.replaceAll(form, REDACTED);
  // A kept token is known only by its hash: anything shaped like one is hashed and compared.
  if (tokenHash !== undefined) {
    scrubbed = scrubbed.replace(GENERATED_TOKEN_SHAPE, (candidate) =>
      hashAdminToken(candidate) === tokenHash ? REDACTED : candidate,
    );
  }
  return scrubbed;
}

/**
 * What of an --rpc-url is secret: a provider's key usually sits in its path or query
 * (`https://host/v2/KEY`), or in user:password.
 */
export function rpcUrlSecrets(rpcUrl: string | undefined): string[] {
  if (!rpcUrl) return [];
  try {
    const url = new URL(rpcUrl);
    const secrets = [decodeURIComponent(url.username), decodeURIComponent(url.password)];
    for (const segment of url.pathname.split('/')) secrets.push(decodeURIComponent(segment));
    for (const value of url.searchParams.values()) secrets.push(value);
    return secrets.filter((part) => part.length >= MIN_SCRUBBED_TOKEN_LENGTH);
  } catch {
    return [];
  }
}

/**
 * The log for a person at a terminal: a request is one line (`GET /health 200 1 ms`), anything
 * else `level: message`. It reads pino's (already scrubbed) JSON lines.
 */
export function humanStream(out: NodeJS.WritableStream): { write(line: string): void } {
  return {
    write(line: string) {
      let entry: { level?: number; msg?: string; summary?: string; err?: { message?: string } };
      try {
        entry = JSON.parse(line);
      } catch {
        out.write(line);
        return;
      }
      if (entry.summary) {
        out.write(`${entry.summary}\n`);
        return;
      }
      // Fastify's own two lines per request give way to the summary above.
      if (entry.msg === 'incoming request' || entry.msg === 'request completed') return;
      const level = LOG_LEVEL_NAMES[entry.level ?? 30] ?? 'info';
      const detail = entry.err?.message ? `: ${entry.err.message}` : '';
      out.write(`${level === 'info' ? '' : `${level}: `}${entry.msg ?? ''}${detail}\n`);
    },
  };
}

/**
 * The text Fastify is given for its "Server listening at …" line (listenTextResolver), so
 * that the log can drop it: serve's ready block says where it listens, and comes first.
 */
export const LISTENING_LOG_TEXT = 'agentctl serve: listening (ready block on stdout)';

/** Pino options for the sandbox's JSON request log (Fastify's `logger` option). */
export function loggerOptions(
  level: LogLevel,
  stream: NodeJS.WritableStream,
  secrets: Array<string | undefined>,
  adminTokenHash?: string,
  format: LogFormat = 'json',
) {
  const forms = secretForms(secrets);
  return {
    level,
    stream: format === 'human' ? humanStream(stream) : stream,
    serializers: {
      req: (request: FastifyRequest) => ({
        method: request.method,
        url: redactUrl(request.url),
        remoteAddress: request.ip,
        remotePort: request.socket?.remotePort,
      }),
      err: serializeError,
    },
    hooks: {
      logMethod(this: unknown, args: unknown[], method: (...args: unknown[]) => void) {
        if (args[0] !== LISTENING_LOG_TEXT) method.apply(this, args);
      },
      streamWrite: (line: string) => scrubSecrets(line, forms, adminTokenHash),
    },
  };
}
