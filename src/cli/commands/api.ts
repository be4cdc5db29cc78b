import { Command, InvalidArgumentError } from 'commander';
import { action } from '../action.ts';

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

export function apiCommand(): Command {
  return new Command('api')
    .summary('a raw call to the service, with the API key attached')
    .description(
      "Call any endpoint and print the body as received. The profile's API key is sent when there is one. GETs are retried like every other command's; other methods never are.",
    )
    .argument('<method>', 'HTTP method', parseMethod)
    .argument('<path>', 'path, for example /api/v1/agent/wallet')
    .option('--data <json>', 'JSON request body', parseData)
    .addHelpText(
      'after',
      `\nExamples:\n  agentctl api GET /api/v1/agent/wallet\n  agentctl api POST /api/v1/agent/vault/deposit --data '{"vault_id":"moderate","amount_usdc":100}'`,
    )
    .action(
      action(async (context, command) => {
        const [method, path] = command.processedArgs as [string, string];
        const { data } = command.opts<{ data?: unknown }>();
        const response = await (await context.client()).raw(method, path, data);
        const out = await context.output();
        if (response.text === '') return;
        if (out.json) return out.raw(response.text);
        try {
          out.jsonValue(JSON.parse(response.text));
        } catch {
          out.raw(response.text);
        }
      }),
    );
}
