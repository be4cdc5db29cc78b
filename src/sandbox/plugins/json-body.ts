import type { FastifyInstance } from 'fastify';
import { exactNumber } from '../../api/schemas/index.ts';
import { HttpError } from '../errors.ts';

/** What JSON.parse passes a reviver as its third argument (Node 22+; not yet in TS's lib). */
interface ReviverContext {
  source?: string;
}

/**
 * Fastify's `constructor.prototype` test: such a key is dropped whole, as secure-json-parse's
 * "remove" action does.
 */
function isPrototypeCarrier(value: unknown): boolean {
  return typeof value === 'object' && value !== null && Object.hasOwn(value, 'prototype');
}

/**
 * Numbers a JS number would round keep their source text (see InexactNumber), and the keys
 * of prototype poisoning are dropped rather than refused: `__proto__` and a `constructor`
 * holding `prototype` mean nothing to any schema, and a client sending valid JSON with them
 * deserves an answer about its fields, not "invalid JSON". (JSON.parse makes `__proto__` an
 * own property, so nothing is polluted before the key is dropped.)
 */
function reviver(key: string, value: unknown, context?: ReviverContext): unknown {
  if (key === '__proto__') return undefined;
  if (key === 'constructor' && isPrototypeCarrier(value)) return undefined;
  // A bare number is no request body; left a number, the schemas refuse it as not an object.
  if (typeof value === 'number' && key !== '' && context?.source !== undefined) {
    return exactNumber(value, context.source);
  }
  return value;
}

/** "line 1 column 8" from V8's message, which would otherwise echo a piece of the body. */
function invalidJson(error: unknown): HttpError {
  const where = /line (\d+) column (\d+)/.exec((error as Error).message);
  return new HttpError(
    400,
    where
      ? `request body is not valid JSON (at line ${where[1]}, column ${where[2]})`
      : 'request body is not valid JSON',
  );
}

export function parseJsonBody(text: string): unknown {
  // A leading byte-order mark is not part of the JSON (Fastify's own parser drops it too).
  const body = text.charCodeAt(0) === 0xfeff ? text.slice(1) : text;
  if (body.length === 0) {
    throw new HttpError(400, 'request body is empty: send a JSON object, or no Content-Type');
  }
  try {
    return JSON.parse(body, reviver as (key: string, value: unknown) => unknown);
  } catch (error) {
    throw invalidJson(error);
  }
}

/**
 * Replaces Fastify's application/json parser with parseJsonBody. The body limit stays the
 * server's (64 KiB, answered with 413), since the parser is added without one of its own.
 */
export function registerJsonBody(app: FastifyInstance): void {
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (_request, body, done) => {
    try {
      done(null, parseJsonBody(body as string));
    } catch (error) {
      done(error as HttpError, undefined);
    }
  });
}
