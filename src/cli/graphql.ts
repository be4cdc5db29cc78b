import type { GraphqlError } from '../api/schemas/index.ts';
import type { Context } from './context.ts';
import { CliError, EXIT, type ExitCode } from './exit-codes.ts';

/**
 * What `agentctl api graphql` and `agentctl watch` share: the exit code of a GraphQL error,
 * the data API's GraphQL URLs, and vault ids looked up there.
 */

/**
 * A GraphQL error's exit code: 1, or as for the REST code it stands for (a bad input or an
 * unknown vault 2, no or a bad key 4, rate limited 5).
 */
export function exitCodeOf(code: string | undefined): ExitCode {
  switch (code) {
    case 'BAD_USER_INPUT':
    case 'NOT_FOUND':
    case 'GRAPHQL_PARSE_FAILED':
    case 'GRAPHQL_VALIDATION_FAILED':
    case 'QUERY_TOO_COMPLEX':
      return EXIT.usage;
    case 'UNAUTHENTICATED':
    case 'FORBIDDEN':
      return EXIT.auth;
    case 'RATE_LIMITED':
      return EXIT.rateLimited;
    default:
      return EXIT.failure;
  }
}

/** The --json error `code` of a GraphQL error code: REST's names, as `describeFailure` gives. */
const JSON_CODES: Record<string, string> = {
  BAD_USER_INPUT: 'bad_request',
  GRAPHQL_PARSE_FAILED: 'bad_request',
  GRAPHQL_VALIDATION_FAILED: 'bad_request',
  QUERY_TOO_COMPLEX: 'bad_request',
  NOT_FOUND: 'not_found',
  UNAUTHENTICATED: 'unauthorized',
  FORBIDDEN: 'forbidden',
  RATE_LIMITED: 'rate_limited',
  INTERNAL_SERVER_ERROR: 'server_error',
};

/**
 * A GraphQL response's errors as the CLI reports them: `CODE: message` of the first, with its
 * exit code, the HTTP status it came with (none over a WebSocket), and the GraphQL code.
 */
export class GraphqlFailure extends CliError {
  readonly status: number | null;
  readonly graphqlCode: string | null;

  constructor(errors: readonly GraphqlError[], status: number | null = null) {
    const first = errors[0];
    const code = first?.extensions?.code;
    const more = errors.length > 1 ? ` (and ${errors.length - 1} more)` : '';
    super(
      `${code ? `${code}: ` : ''}${first?.message ?? 'GraphQL error'}${more}`,
      exitCodeOf(code),
      (code && JSON_CODES[code]) ?? 'failure',
    );
    this.name = 'GraphqlFailure';
    this.status = status;
    this.graphqlCode = code ?? null;
  }
}

/** The WebSocket URL of the data API's GraphQL endpoint (ws:// or wss://). */
export function graphqlSocketUrl(dataUrl: string): string {
  const url = new URL(`${dataUrl.replace(/\/+$/, '')}/graphql`);
  url.protocol = url.protocol === 'https:' ? 'wss:' : 'ws:';
  return url.toString();
}

/** `name=value` pairs as variables: a value that parses as JSON is that JSON, else a string. */
export function parseVariables(pairs: readonly string[]): Record<string, unknown> {
  const variables: Record<string, unknown> = {};
  for (const pair of pairs) {
    const at = pair.indexOf('=');
    const name = at > 0 ? pair.slice(0, at) : '';
    if (!/^[_A-Za-z][_0-9A-Za-z]*$/.test(name)) {
      throw new CliError(
        `--var ${pair}: expected name=value, for example --var address=0xabc… or --var limit=10`,
        EXIT.usage,
      );
    }
    const text = pair.slice(at + 1);
    try {
      variables[name] = JSON.parse(text);
    } catch {
      variables[name] = text;
    }
  }
  return variables;
}

/** A vault address as given, or a vault id (moderate, …) looked up by name over GraphQL. */
export async function vaultAddressOver(context: Context, value: string): Promise<string> {
  const { checkAddress, vaultId } = await import('./args.ts');
  if (value.startsWith('0x')) return checkAddress('vault', value);
  const id = vaultId(value);
  const client = await context.dataClient();
  const response = await client.graphql('{ vaults { address name } }');
  if (response.data.errors?.length) {
    throw new GraphqlFailure(response.data.errors, response.status);
  }
  const vaults = (response.data.data?.vaults ?? []) as Array<{ address: string; name: string }>;
  const found = vaults.find((vault) => vault.name.toLowerCase().includes(id));
  if (!found) {
    throw new CliError(
      `vault ${value}: the data API lists no vault named for it; give the vault's address`,
      EXIT.usage,
    );
  }
  return found.address;
}
