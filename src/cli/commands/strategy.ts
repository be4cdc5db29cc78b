import { readFileSync } from 'node:fs';
import { Command, Option } from 'commander';
import { action } from '../action.ts';
import { CliError, EXIT } from '../exit-codes.ts';

/** Flags and the API fields they fill; `--file` takes the API's own names. */
const NUMERIC_FLAGS = {
  maxPositionSize: 'max_position_size_percent',
  maxLeverage: 'max_leverage',
  stopLoss: 'stop_loss_percent',
  slippage: 'slippage_tolerance_bps',
  correlation: 'correlation_threshold',
  velocityLimit: 'velocity_limit',
} as const;

interface SubmitFlags {
  name?: string;
  description?: string;
  dna?: string;
  maxPositionSize?: string;
  maxLeverage?: string;
  stopLoss?: string;
  slippage?: string;
  correlation?: string;
  velocityLimit?: string;
  flashLoans?: boolean;
  file?: string;
  dryRun?: boolean;
}

/** The request body from --file or the flags (flags win over the file). */
function requestFrom(flags: SubmitFlags): Record<string, unknown> {
  let body: Record<string, unknown> = {};
  if (flags.file) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(readFileSync(flags.file, 'utf8'));
    } catch (error) {
      throw new CliError(`--file ${flags.file}: ${(error as Error).message}`, EXIT.usage);
    }
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
      throw new CliError(`--file ${flags.file}: must hold a JSON object`, EXIT.usage);
    }
    body = parsed as Record<string, unknown>;
  }
  if (flags.name !== undefined) body.name = flags.name;
  if (flags.description !== undefined) body.description = flags.description;
  if (flags.dna !== undefined) body.dna_string = flags.dna;
  for (const [flag, field] of Object.entries(NUMERIC_FLAGS)) {
    const value = flags[flag as keyof typeof NUMERIC_FLAGS];
    if (value === undefined) continue;
    const flagName = `--${flag.replace(/[A-Z]/g, (letter) => `-${letter.toLowerCase()}`)}`;
    if (!/^\d+$/.test(value))
      throw new CliError(`${flagName} ${value}: must be a whole number`, EXIT.usage);
    body[field] = Number(value);
  }
  if (flags.flashLoans) body.flash_loans_enabled = true;
  const missing = [
    body.name === undefined ? '--name' : undefined,
    body.description === undefined ? '--description' : undefined,
  ].filter(Boolean);
  if (missing.length > 0) {
    throw new CliError(`missing ${missing.join(' and ')} (or give them in --file)`, EXIT.usage);
  }
  return body;
}

export function strategyCommand(): Command {
  const strategy = new Command('strategy').summary('submit and list strategies');
  strategy
    .command('submit')
    .description(
      "Submit a DNA-encoded strategy to the registry from the agent's server-side wallet. Risk parameters are checked against the spec's bounds before anything is sent.",
    )
    .option('--name <text>', 'strategy name, 3 to 100 characters')
    .option('--description <text>', 'description, 10 to 2000 characters')
    .option('--dna <hex>', '32-byte DNA, 64 hex digits (0x optional); derived when omitted')
    .option('--max-position-size <percent>', 'max position size, 1 to 100 (default 10)')
    .option('--max-leverage <n>', 'max leverage, 100 to 1000; 100 means 1x (default 200)')
    .option('--stop-loss <bps>', 'stop loss in basis points, 50 to 5000 (default 500)')
    .option('--slippage <bps>', 'slippage tolerance in basis points, 1 to 1000 (default 100)')
    .option('--correlation <n>', 'correlation threshold, 0 to 100; 70 means 0.7 (default 70)')
    .option('--velocity-limit <n>', 'capital movement per period, at least 1000 (default 1000000)')
    .option('--flash-loans', 'allow flash loans (default: not allowed)')
    .addOption(new Option('--file <file>', 'a JSON object with the API field names'))
    .option('--dry-run', 'check and print the request, send nothing')
    .addHelpText(
      'after',
      `\nExamples:\n  agentctl strategy submit --name "Mean reversion" --description "Buys dips, sells rips." --max-leverage 300\n  agentctl strategy submit --file strategy.json --dry-run`,
    )
    .action(
      action(async (context, command) => {
        const flags = command.opts<SubmitFlags>();
        const body = requestFrom(flags);
        const { StrategySubmitRequest, describeZodError } = await import(
          '../../api/schemas/index.ts'
        );
        const parsed = StrategySubmitRequest.safeParse(body);
        if (!parsed.success)
          throw new CliError(describeZodError(parsed.error, 'strategy'), EXIT.usage);
        const out = await context.output();
        if (flags.dryRun) {
          if (out.json) return out.jsonValue(parsed.data);
          out.info('dry run: the request is valid; nothing was sent');
          return out.fields(parsed.data);
        }
        const client = await context.authenticatedClient();
        const response = await out.progress('waiting for the submission to confirm', () =>
          client.submitStrategy(body),
        );
        out.writeResult(response, (result) => {
          out.print(
            `submitted "${result.strategy_name}" as ${result.strategy_id} (${result.status})`,
          );
          out.print(`dna ${result.dna_string}`);
          out.print(`tx  ${result.tx_hash} (block ${result.block_number}, gas ${result.gas_used})`);
        });
      }),
    );
  strategy
    .command('list')
    .description("List the agent's strategies, enumerated onchain from the registry.")
    .addHelpText('after', '\nExample:\n  agentctl strategy list')
    .action(
      action(async (context) => {
        const response = await (await context.authenticatedClient()).strategies();
        const out = await context.output();
        if (out.json) return out.raw(response.text);
        if (response.data.strategies.length === 0) return out.print('no strategies');
        out.table(
          ['strategy id', 'name', 'status', 'created', 'last change'],
          response.data.strategies.map((s) => [
            s.strategy_id,
            s.name,
            s.status,
            new Date(s.created_at * 1000).toISOString(),
            new Date(s.last_status_change * 1000).toISOString(),
          ]),
        );
      }),
    );
  return strategy;
}
