import type { Command } from 'commander';
import type { z } from 'zod';
import type { ApiClient, ApiResponse, Read } from '../api/client.ts';
import type { Context } from './context.ts';
import { CliError, EXIT } from './exit-codes.ts';

/**
 * The sandbox admin API (`agentctl serve` only), for the `sandbox` commands: every call
 * carries the token from --admin-token or AGENTCTL_ADMIN_TOKEN.
 */

type Schemas = typeof import('../api/schemas/index.ts');

/** The --admin-token the `sandbox` group was given (or AGENTCTL_ADMIN_TOKEN), for a verb's options. */
export function adminTokenOf(command: Command): string | undefined {
  return command.optsWithGlobals<{ adminToken?: string }>().adminToken;
}

/** The token, or a refusal (exit 4) that says where to find it. */
export function requireAdminToken(token: string | undefined): string {
  if (!token) {
    throw new CliError(
      'no admin token: pass --admin-token or set AGENTCTL_ADMIN_TOKEN (agentctl serve prints it at start)',
      EXIT.auth,
    );
  }
  return token;
}

/**
 * A GET of the admin API as a read for showRead(): checked against `shape` when rendered,
 * the body as received with --json.
 */
export async function adminRead<S extends z.ZodType>(
  context: Context,
  token: string | undefined,
  path: string,
  shape: (schemas: Schemas) => S,
): Promise<Read<[], z.output<S>>> {
  const adminToken = requireAdminToken(token);
  const client = await context.client();
  const asReceived = () => client.sandbox(adminToken, 'GET', path);
  return Object.assign(async () => checked(await asReceived(), 'GET', path, shape), { asReceived });
}

/** An admin answer checked against the contract: its parsed value, or UnexpectedResponseError. */
async function checked<S extends z.ZodType>(
  response: ApiResponse,
  method: string,
  path: string,
  shape: (schemas: Schemas) => S,
): Promise<ApiResponse<z.output<S>>> {
  const schemas = await import('../api/schemas/index.ts');
  const parsed = shape(schemas).safeParse(response.data);
  if (!parsed.success) {
    const { UnexpectedResponseError } = await import('../api/errors.ts');
    throw new UnexpectedResponseError(
      response.status,
      `unexpected answer from ${method} ${path}: ${schemas.describeZodError(parsed.error, 'body')}`,
    );
  }
  return { ...response, data: parsed.data as z.output<S> };
}

/**
 * A POST to the admin API whose answer a caller goes on with (a seed file's step): the parsed
 * answer, or UnexpectedResponseError when it does not have the contract's shape.
 */
export async function adminPost<S extends z.ZodType>(
  client: ApiClient,
  adminToken: string,
  path: string,
  body: unknown,
  shape: (schemas: Schemas) => S,
): Promise<z.output<S>> {
  const response = await client.sandbox(adminToken, 'POST', path, body);
  return (await checked(response, 'POST', path, shape)).data;
}

/**
 * A POST to the admin API: with --json the body as received, else `render` when the answer
 * has the contract's shape (every field, with a warning, when it has not: the write happened).
 */
export async function adminWrite<S extends z.ZodType>(
  context: Context,
  token: string | undefined,
  path: string,
  body: unknown,
  shape: (schemas: Schemas) => S,
  render: (result: z.output<S>) => void,
): Promise<void> {
  const adminToken = requireAdminToken(token);
  const client = await context.client();
  const out = await context.output();
  const response = await client.sandbox(adminToken, 'POST', path, body);
  if (out.json) return out.raw(response.text);
  const parsed = shape(await import('../api/schemas/index.ts')).safeParse(response.data);
  out.writeResult({ ...response, parsed: parsed.success ? parsed.data : undefined }, render);
}
