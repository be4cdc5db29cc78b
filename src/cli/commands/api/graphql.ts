import { Command } from 'commander';
import { action } from '../../action.ts';
import type { Context } from '../../context.ts';

/** `agentctl api graphql --query … [--var name=value]…`, as typed. */
export interface ApiGraphqlOptions {
  query: string;
  /** `name=value` pairs, parsed in run. */
  vars: string[];
}

const collect = (value: string, previous: string[]) => [...previous, value];

/** `agentctl api graphql`: one GraphQL operation against the data API. */
export function graphqlCommand(): Command {
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
      `\nExamples:\n  agentctl api graphql \\\n    --query '{ vaults(orderBy: TVL_DESC) { name tvl apy { current } } }'\n  agentctl api graphql --var a=0xabc… \\\n    --query 'query ($a: String!) { userPositions(address: $a) { value pnl } }'`,
    )
    .action(
      action((context, command) => {
        const { query, var: vars } = command.opts<{ query: string; var: string[] }>();
        return run({ query, vars }, context);
      }),
    );
}

export async function run(options: ApiGraphqlOptions, context: Context): Promise<void> {
  const { GraphqlFailure, parseVariables } = await import('../../graphql.ts');
  const variables = parseVariables(options.vars);
  const client = await context.dataClient();
  const response = await client.graphql(options.query, variables);
  const out = await context.output();
  if (out.json) out.raw(response.text);
  else out.print(JSON.stringify(JSON.parse(response.text), null, 2));
  if (response.data.errors?.length) {
    throw new GraphqlFailure(response.data.errors, response.status);
  }
}
