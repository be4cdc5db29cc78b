import type { FastifyError, FastifyInstance } from 'fastify';
import { ChainUnavailableError, isUnreachable } from '../chain/errors.ts';
import { HttpError } from '../errors.ts';

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
export function registerErrorHandling(app: FastifyInstance): void {
  app.setErrorHandler((error: FastifyError, request, reply) => {
    // A chain read that fails because the node is down is the chain's unavailability,
    // not a bug: say so with 503.
    if (isUnreachable(error)) {
      request.log.warn({ err: error }, 'chain unreachable');
      return reply.code(503).send({ error: new ChainUnavailableError().message });
    }
    const status =
      error.statusCode !== undefined && error.statusCode >= 400 ? error.statusCode : 500;
    if (status >= 500 && !(error instanceof HttpError)) {
      request.log.error({ err: error }, 'request failed');
      return reply.code(500).send({ error: 'internal server error' });
    }
    return reply.code(status).send({ error: FRIENDLIER[error.code] ?? error.message });
  });

  // Only JSON bodies are part of the contract: anything else is 415, not parsed as a string.
  app.removeContentTypeParser('text/plain');

  app.setNotFoundHandler((request, reply) => {
    const path = (request.url.split('?')[0] ?? '').slice(0, 200);
    return reply.code(404).send({ error: `no such endpoint: ${request.method} ${path}` });
  });
}
