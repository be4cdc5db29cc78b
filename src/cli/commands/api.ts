import { Command, InvalidArgumentError } from 'commander';
import { action } from '../action.ts';
import { CliError, EXIT } from '../exit-codes.ts';

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

const collect = (value: string, previous: string[]) => [...previous, value];

/** `agentctl api graphql`: one GraphQL operation against the data API. */
function graphqlCommand(): Command {
  return new Command('graphql')
    .summary('a GraphQL query against the data API, its JSON response printed')
    .description(
      "Run a GraphQL query against the data API's /graphql (at --data-url, AGENTCTL_DATA_URL or the profile's data_url, else the base URL) and print the JSON response. A response with errors exits 1, or as for REST by its code: BAD_USER_INPUT, NOT_FOUND, GRAPHQL_PARSE_FAILED, GRAPHQL_VALIDATION_FAILED and QUERY_TOO_COMPLEX 2, UNAUTHENTICATED 4, RATE_LIMITED 5.",
    )
    .requiredOption('--query <query>', 'the GraphQL document')
    .option(
      '--var <name=value>',
      'a variable (repeat for more); a value that parses as JSON is that JSON, else a string',
      collect,
      [],
    )
    .option(
      '--data-url <url>',
      "data API URL (env AGENTCTL_DATA_URL; default: the profile's data_url, else the base URL)",
    )
    .addHelpText(
      'after',
      `\nExamples:\n  agentctl api graphql --query '{ vaults(orderBy: TVL_DESC) { name tvl apy { current } } }'\n  agentctl api graphql --query 'query ($a: String!) { userPositions(address: $a) { vault { name } value pnl } }' --var a=0xabc…`,
    )
    .action(
      action(async (context, command) => {
        const { query, var: pairs } = command.opts<{ query: string; var: string[] }>();
        const { GraphqlFailure, parseVariables } = await import('../graphql.ts');
        const variables = parseVariables(pairs);
        const client = await context.dataClient();
        const response = await client.graphql(query, variables);
        const out = await context.output();
        if (out.json) out.raw(response.text);
        else out.print(JSON.stringify(JSON.parse(response.text), null, 2));
        if (response.data.errors?.length) {
          throw new GraphqlFailure(response.data.errors, response.status);
        }
      }),
    );
}

export function apiCommand(): Command {
  return new Command('api')
    .summary('a raw call to the service, with the API key attached')
    .description(
      "Call any endpoint and print the body as received. The profile's API key is sent when there is one. GETs are retried like every other command's; other methods never are.",
    )
    .argument('<method>', 'HTTP method', parseMethod)
    .argument('<path>', 'path, for example /api/v1/agent/wallet, or a full URL on the service')
    .option('--data <json>', 'JSON request body', parseData)
    .addHelpText(
      'after',
      `\nExamples:\n  agentctl api GET /api/v1/agent/wallet\n  agentctl api graphql --query '{ protocolStats { totalTvl } }'\n  agentctl api GET http://127.0.0.1:8787/api/v1/vaults\n  agentctl api POST /api/v1/agent/vault/deposit --data '{"vault_id":"moderate","amount_usdc":100}'`,
    )
    .action(
      action(async (context, command) => {
        const [method, target] = command.processedArgs as [string, string];
        const { data } = command.opts<{ data?: unknown }>();
        const client = await context.client();
        const response = await client.raw(method, pathOn(client.baseUrl, target), data);
        const out = await context.output();
        if (response.text === '') return;
        if (out.json) return out.raw(response.text);
        try {
          // For people: indented. --json gets the body exactly as received.
          out.print(JSON.stringify(JSON.parse(response.text), null, 2));
        } catch {
          out.raw(response.text);
        }
      }),
    )
    .addCommand(graphqlCommand());
}
