import type { FastifySchemaCompiler, FastifyTypeProvider } from 'fastify';
import type { FastifySerializerCompiler } from 'fastify/types/schema.js';
import type { z } from 'zod';
import { describeZodError } from '../../api/schemas/index.ts';

/**
 * Lets route schemas be the shared zod schemas from src/api/schemas: requests are
 * parsed (defaults applied, unknown fields dropped) and responses are checked against
 * the contract before they leave, so the sandbox cannot drift from what clients parse.
 */
export interface ZodTypeProvider extends FastifyTypeProvider {
  validator: this['schema'] extends z.ZodType ? z.output<this['schema']> : unknown;
  serializer: this['schema'] extends z.ZodType ? z.input<this['schema']> : unknown;
}

export const validatorCompiler: FastifySchemaCompiler<z.ZodType> =
  ({ schema, httpPart }) =>
  (data) => {
    const result = schema.safeParse(data);
    if (result.success) return { value: result.data };
    const part = httpPart === 'querystring' ? 'query' : (httpPart ?? 'input');
    return { error: new Error(describeZodError(result.error, part)) };
  };

export const serializerCompiler: FastifySerializerCompiler<z.ZodType> =
  ({ schema }) =>
  (data) =>
    JSON.stringify(schema.parse(data));
