import {
  type ExecutionResult,
  type FormattedExecutionResult,
  GraphQLError,
  type GraphQLFormattedError,
  parse,
  visit,
} from 'graphql';
import type { DataErrorCode, GRAPHQL_ERROR_CODES } from '../../api/schemas/index.ts';
import { DataApiError } from '../errors.ts';
import { isConnectionFailure } from '../indexer/failure.ts';
import { TooManyPointsError } from '../indexer/vaults.ts';
import { databaseUnreachableMessage } from '../plugins/errors.ts';

export type GraphqlErrorCode = (typeof GRAPHQL_ERROR_CODES)[number];

/** An error a resolver throws: the client sees its message, with `code` in extensions. */
export function graphqlError(
  code: GraphqlErrorCode,
  message: string,
  details: Record<string, unknown> = {},
): GraphQLError {
  return new GraphQLError(message, { extensions: { code, ...details } });
}

/** The data API's REST codes, as GraphQL codes. */
const FROM_DATA_CODES: Record<DataErrorCode, GraphqlErrorCode> = {
  VAULT_NOT_FOUND: 'NOT_FOUND',
  STRATEGY_NOT_FOUND: 'NOT_FOUND',
  NOT_FOUND: 'NOT_FOUND',
  INVALID_ADDRESS: 'BAD_USER_INPUT',
  INVALID_PARAMETER: 'BAD_USER_INPUT',
  INVALID_API_KEY: 'UNAUTHENTICATED',
  RATE_LIMITED: 'RATE_LIMITED',
  INTERNAL_ERROR: 'INTERNAL_SERVER_ERROR',
  INDEX_UNAVAILABLE: 'INDEX_UNAVAILABLE',
};

/** The HTTP status of a response that has no data, by its first error's code. */
const STATUS_OF: Partial<Record<GraphqlErrorCode, number>> = {
  BAD_USER_INPUT: 400,
  GRAPHQL_PARSE_FAILED: 400,
  GRAPHQL_VALIDATION_FAILED: 400,
  QUERY_TOO_COMPLEX: 400,
  UNAUTHENTICATED: 401,
  RATE_LIMITED: 429,
  INTERNAL_SERVER_ERROR: 500,
};

/** Validation messages (graphql-js's wording) that are about an argument's or variable's value. */
const INPUT_PROBLEM =
  /argument|Expected value of type|does not exist in "[^"]+" enum|cannot represent|Variable "\$/;

/** A resolver's failure, in GraphQL's terms: the shared queries throw DataApiError. */
export function fromQueryError(error: unknown): unknown {
  if (error instanceof DataApiError) {
    return graphqlError(FROM_DATA_CODES[error.code], error.message);
  }
  if (error instanceof TooManyPointsError) return graphqlError('BAD_USER_INPUT', error.message);
  // The sandbox's PostgreSQL database cannot be reached (a replica's store read, say): the
  // index's unavailability, as /v1 says it, never an internal error.
  if (isConnectionFailure(error)) {
    return graphqlError('INDEX_UNAVAILABLE', databaseUnreachableMessage(error));
  }
  return error;
}

interface LoggedError extends Error {
  originalError?:
    | (Error & {
        errors?: unknown[];
        statusCode?: number;
        code?: string;
        extensions?: Record<string, unknown>;
      })
    | null;
  extensions?: Record<string, unknown>;
  locations?: ReadonlyArray<{ line: number; column: number }>;
  path?: ReadonlyArray<string | number>;
  source?: { body: string };
  positions?: readonly number[];
  statusCode?: number;
}

/**
 * Every error as the spec's standard shape: message, locations, path (the field's, when the
 * error belongs to a field or an argument of one; empty otherwise) and extensions.code. An
 * error no code was given for is an internal one: logged, and answered as "internal server
 * error". At most `maxErrors` are answered (graphql-js stops validating there too), and the
 * work is linear in the document: its fields are indexed once, whatever the errors' number.
 */
export function formatGraphqlErrors(
  execution: ExecutionResult & { statusCode?: number },
  log: { error(object: unknown, message: string): void },
  maxErrors = Number.POSITIVE_INFINITY,
): { statusCode: number; response: FormattedExecutionResult } {
  const flat: Array<{ error: LoggedError; invalid: boolean }> = [];
  for (const error of (execution.errors ?? []) as readonly LoggedError[]) {
    // mercurius wraps a failed validation as one error holding the list.
    const inner = error.originalError?.errors;
    if (Array.isArray(inner)) {
      for (const one of inner as LoggedError[]) flat.push({ error: one, invalid: true });
    } else flat.push({ error, invalid: false });
  }
  const fields = new Map<string, FieldIndex | undefined>();
  const errors = flat
    .slice(0, maxErrors)
    .map(({ error, invalid }) => formatOne(error, invalid, log, fields));
  const first = errors[0]?.extensions?.code as GraphqlErrorCode | undefined;
  // An index being rebuilt answers no field truly, whatever else the document asked.
  const unavailable = errors.some((error) => error.extensions?.code === 'INDEX_UNAVAILABLE');
  const statusCode = unavailable
    ? 503
    : execution.data
      ? 200
      : ((first && STATUS_OF[first]) ?? 200);
  return { statusCode, response: { data: execution.data ?? null, errors } };
}

function formatOne(
  error: LoggedError,
  invalid: boolean,
  log: { error(object: unknown, message: string): void },
  fields: Map<string, FieldIndex | undefined>,
): GraphQLFormattedError {
  const original = error.originalError ?? undefined;
  const given = (error.extensions?.code ?? original?.extensions?.code) as string | undefined;
  let code: string;
  let message = error.message;
  if (given && given !== 'INTERNAL_SERVER_ERROR') {
    code = given;
  } else if (
    original instanceof DataApiError ||
    original instanceof TooManyPointsError ||
    isConnectionFailure(original)
  ) {
    const mapped = fromQueryError(original) as GraphQLError;
    code = mapped.extensions.code as string;
    message = mapped.message;
  } else if (/^Syntax Error/.test(message)) {
    code = 'GRAPHQL_PARSE_FAILED';
  } else if (error instanceof GraphQLError && !original && !error.path) {
    // A validation error (no field ran): about a value given, or about the document.
    code = INPUT_PROBLEM.test(message) ? 'BAD_USER_INPUT' : 'GRAPHQL_VALIDATION_FAILED';
  } else if (error instanceof GraphQLError && !error.path && /^Variable "\$/.test(message)) {
    // A variable's value that does not coerce (the scalar's own error is the original).
    code = 'BAD_USER_INPUT';
  } else if (invalid) {
    code = 'BAD_USER_INPUT';
  } else {
    const status = original?.statusCode ?? error.statusCode;
    if (status !== undefined && status >= 400 && status < 500) {
      code = 'BAD_USER_INPUT';
    } else {
      log.error({ err: original ?? error }, 'GraphQL request failed');
      code = 'INTERNAL_SERVER_ERROR';
      message = 'internal server error';
    }
  }
  const locations = error.locations ? [...error.locations] : [];
  const path = error.path ? [...error.path] : (fieldPathAt(error, fields) ?? []);
  const { code: _ignored, ...rest } = {
    ...(original?.extensions ?? {}),
    ...(error.extensions ?? {}),
  } as Record<string, unknown>;
  return {
    message,
    locations,
    path,
    extensions: { ...rest, code },
  };
}

/**
 * A document's fields in the order they start, each with its response path and the field it
 * is nested in: built in one walk, then asked once per error.
 */
interface FieldIndex {
  starts: number[];
  ends: number[];
  parents: number[];
  names: string[];
}

function indexFields(body: string): FieldIndex | undefined {
  let document: ReturnType<typeof parse>;
  try {
    document = parse(body);
  } catch {
    return undefined;
  }
  const index: FieldIndex = { starts: [], ends: [], parents: [], names: [] };
  const open: number[] = [];
  visit(document, {
    Field: {
      enter(node) {
        index.starts.push(node.loc?.start ?? -1);
        index.ends.push(node.loc?.end ?? -1);
        index.parents.push(open.at(-1) ?? -1);
        index.names.push(node.alias?.value ?? node.name.value);
        open.push(index.starts.length - 1);
      },
      leave() {
        open.pop();
      },
    },
  });
  return index;
}

/**
 * The response path of the innermost field an error points into (an argument's bad value,
 * say); undefined when it points at no field. Fields start in document order, so the last one
 * that starts at or before the error's offset, or one of the fields it is nested in, is it.
 */
function fieldPathAt(
  error: LoggedError,
  fields: Map<string, FieldIndex | undefined>,
): Array<string | number> | undefined {
  const offset = error.positions?.[0];
  const body = error.source?.body;
  if (offset === undefined || body === undefined) return undefined;
  if (!fields.has(body)) fields.set(body, indexFields(body));
  const index = fields.get(body);
  if (!index) return undefined;
  let low = 0;
  let high = index.starts.length - 1;
  let found = -1;
  while (low <= high) {
    const middle = (low + high) >> 1;
    if ((index.starts[middle] as number) <= offset) {
      found = middle;
      low = middle + 1;
    } else high = middle - 1;
  }
  while (found >= 0 && offset >= (index.ends[found] as number)) {
    found = index.parents[found] as number;
  }
  if (found < 0) return undefined;
  const path: string[] = [];
  for (let at = found; at >= 0; at = index.parents[at] as number) {
    path.unshift(index.names[at] as string);
  }
  return path;
}
