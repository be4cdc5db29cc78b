import type { FastifyError, FastifySchemaCompiler } from 'fastify';
import { getAddress } from 'viem';
import type { z } from 'zod';
import {
  DATA_ERROR_CODES,
  type DataError,
  type DataErrorCode,
  TransactionsQuery,
  UserParams,
  UserPositions,
  UserTransactions,
} from '../../api/schemas/index.ts';
import { isUnreachable } from '../chain/errors.ts';
import { userPositions, userTransactions } from '../indexer/reads.ts';
import type { ZodTypeProvider } from '../plugins/zod.ts';
import type { App, RouteDeps } from './types.ts';

/** An error the data API answers as `{error: {code, message, details}}`. */
export class DataApiError extends Error {
  readonly code: DataErrorCode;
  readonly details: Record<string, unknown>;
  /** Writable: Fastify sets it on validation errors. */
  statusCode: number;

  constructor(code: DataErrorCode, message: string, details: Record<string, unknown> = {}) {
    super(message);
    this.name = 'DataApiError';
    this.code = code;
    this.details = details;
    this.statusCode = DATA_ERROR_CODES[code];
  }

  body(): DataError {
    return { error: { code: this.code, message: this.message, details: this.details } };
  }
}

/**
 * Validation in the data API's words: a bad path address is INVALID_ADDRESS, any other bad
 * parameter INVALID_PARAMETER naming it in details.parameter.
 */
const dataValidator: FastifySchemaCompiler<z.ZodType> =
  ({ schema, httpPart }) =>
  (data) => {
    const result = schema.safeParse(data);
    if (result.success) return { value: result.data };
    const issue = result.error.issues[0];
    const parameter = String(issue?.path[0] ?? httpPart ?? 'request');
    const given = (data as Record<string, unknown> | undefined)?.[parameter];
    const error =
      httpPart === 'params' && parameter === 'address'
        ? new DataApiError(
            'INVALID_ADDRESS',
            `${JSON.stringify(given)} is not an address: ${issue?.message}`,
            { parameter, value: given },
          )
        : new DataApiError('INVALID_PARAMETER', issue?.message ?? 'invalid parameter', {
            parameter,
            ...(given !== undefined && { value: given }),
          });
    return { error };
  };

/**
 * Part B's REST half, under /v1, served from the index (index.db) rather than the chain: a
 * write is indexed before it is answered, other chain activity within a poll.
 */
export function registerDataRoutes(app: App, { chain, limits }: RouteDeps): void {
  app.register(
    async (scope) => {
      const v1 = scope.withTypeProvider<ZodTypeProvider>();
      v1.setValidatorCompiler(dataValidator);
      v1.setErrorHandler((error: FastifyError, request, reply) => {
        if (error instanceof DataApiError) {
          return reply.code(DATA_ERROR_CODES[error.code]).send(error.body());
        }
        if (error.statusCode === 429) {
          return reply.code(429).send(new DataApiError('RATE_LIMITED', error.message).body());
        }
        if (error.statusCode !== undefined && error.statusCode >= 400 && error.statusCode < 500) {
          return reply
            .code(error.statusCode)
            .send(new DataApiError('INVALID_PARAMETER', error.message).body());
        }
        request.log.error(
          { err: error },
          isUnreachable(error) ? 'chain unreachable' : 'request failed',
        );
        return reply
          .code(500)
          .send(new DataApiError('INTERNAL_ERROR', 'internal server error').body());
      });
      v1.setNotFoundHandler((request, reply) => {
        const path = (request.url.split('?')[0] ?? '').slice(0, 200);
        return reply
          .code(404)
          .send(
            new DataApiError('NOT_FOUND', `no such endpoint: ${request.method} ${path}`).body(),
          );
      });

      v1.get(
        '/users/:address/transactions',
        {
          schema: {
            params: UserParams,
            querystring: TransactionsQuery,
            response: { 200: UserTransactions },
          },
          onRequest: limits.public,
        },
        async (request) => {
          const { address } = request.params;
          const { type, limit, offset } = request.query;
          const page = userTransactions(chain.index.db, address, { type, limit, offset });
          return { address: getAddress(address), ...page, limit, offset };
        },
      );

      v1.get(
        '/users/:address/positions',
        {
          schema: { params: UserParams, response: { 200: UserPositions } },
          onRequest: limits.public,
        },
        async (request) => {
          const { address } = request.params;
          return { address: getAddress(address), positions: userPositions(chain.index, address) };
        },
      );
    },
    { prefix: '/v1' },
  );
}
