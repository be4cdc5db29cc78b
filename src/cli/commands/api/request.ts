import { Command, InvalidArgumentError } from 'commander';
import { action } from '../../action.ts';
import type { Context } from '../../context.ts';
import { CliError, EXIT } from '../../exit-codes.ts';

/** `agentctl api <method> <path> [--data]`, as parsed. */
export interface ApiRequestOptions {
  method: string;
  /** A path on the service, or a full URL on it. */
  target: string;
  /** The parsed JSON body, when --data was given. */
  data?: unknown;
}

function parseMethod(value: string): string {
  const method = value.toUpperCase();
  if (!/^(GET|POST|PUT|PATCH|DELETE|HEAD|OPTIONS)$/.test(method)) {
    throw new InvalidArgumentError('must be an HTTP method such as GET or POST');
  }
  return method;
}

function parseData(value: string): unknown {
  try {
    return JSON.parse(value);
  } catch {
    throw new InvalidArgumentError('must be valid JSON, for example \'{"vault_id":"moderate"}\'');
  }
}

/**
 * The path to request: a path as given, or a full URL (as gh api takes) when it is on the
 * service. A URL elsewhere is refused: the API key must never go to another host.
 */
export function pathOn(baseUrl: string, target: string): string {
  if (!/^https?:\/\//i.test(target)) return target.startsWith('/') ? target : `/${target}`;
  const base = new URL(baseUrl);
  let url: URL;
  try {
    url = new URL(target);
  } catch {
    throw new CliError(`${target}: not a valid URL`, EXIT.usage);
  }
  const basePath = base.pathname.replace(/\/+$/, '');
  if (url.origin !== base.origin || !url.pathname.startsWith(basePath)) {
    throw new CliError(
      `${target} is not on the service (${baseUrl}); the API key is only sent there: pass --base-url ${url.origin} to call that host`,
      EXIT.usage,
    );
  }
  return `${url.pathname.slice(basePath.length) || '/'}${url.search}`;
}

/**
 * The `api` command itself: a raw call. Its subcommands (graphql) are added by ./index.ts.
 */
export function requestCommand(): Command {
  return new Command('api')
    .summary('a raw call to the service, with the API key attached')
    .description(
      "Call any endpoint and print the body as received. The profile's API key is sent when there is one. GETs are retried like every other command's; other methods never are. --idempotency-key KEY goes with a write as its Idempotency-Key, as given (a repeat with the same key and body gets the kept answer where the service honours keys).",
    )
    .argument('<method>', 'HTTP method', parseMethod)
    .argument('<path>', 'path, for example /api/v1/agent/wallet, or a full URL on the service')
    .option('--data <json>', 'JSON request body', parseData)
    .addHelpText(
      'after',
      `\nExamples:\n  agentctl api GET /api/v1/agent/wallet\n  agentctl api graphql --query '{ protocolStats { totalTvl } }'\n  agentctl api GET http://127.0.0.1:8787/api/v1/vaults\n  agentctl api POST /api/v1/agent/vault/deposit \\\n    --data '{"vault_id":"moderate","amount_usdc":100}' \\\n    --idempotency-key ci-81-deposit`,
    )
    .action(
      action((context, command) => {
        const [method, target] = command.processedArgs as [string, string];
        return run({ method, target, data: command.opts<{ data?: unknown }>().data }, context);
      }),
    );
}

/** Methods that only read: an Idempotency-Key means nothing to them. */
const READ_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

export async function run(options: ApiRequestOptions, context: Context): Promise<void> {
  // --idempotency-key goes verbatim with a write; the request is still sent once, as every
  // `api` write is (this command does not know which service honours keys for which route).
  const key = context.globals.idempotencyKey;
  if (key !== undefined && READ_METHODS.has(options.method)) {
    throw new CliError(
      `--idempotency-key: a ${options.method} is not a write; the key goes with POST, PUT, PATCH or DELETE`,
      EXIT.usage,
    );
  }
  const client = await context.client();
  const response = await client.raw(
    options.method,
    pathOn(client.baseUrl, options.target),
    options.data,
    key === undefined ? undefined : { 'idempotency-key': key },
  );
  const out = await context.output();
  if (response.text === '') return;
  if (out.json) return out.raw(response.text);
  try {
    // For people: indented. --json gets the body exactly as received.
    out.print(JSON.stringify(JSON.parse(response.text), null, 2));
  } catch {
    out.raw(response.text);
  }
}
