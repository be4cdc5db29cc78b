import { readFileSync, statSync } from 'node:fs';
import { Command, Option } from 'commander';
import { action } from '../../action.ts';
import type { Context } from '../../context.ts';
import { CliError, EXIT } from '../../exit-codes.ts';
import { strategyFields, TABLE_WIDTH, wrapText } from '../../format.ts';
import { type Suggesting, suggesting } from '../../suggest.ts';

/** Flags and the API fields they fill; `--file` takes the API's own names. */
const NUMERIC_FLAGS = {
  maxPositionSize: 'max_position_size_percent',
  maxLeverage: 'max_leverage',
  stopLoss: 'stop_loss_percent',
  slippage: 'slippage_tolerance_bps',
  correlation: 'correlation_threshold',
  velocityLimit: 'velocity_limit',
} as const;

/** `agentctl strategy submit`'s flags, as typed (numbers are checked in run). */
export interface StrategySubmitOptions {
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

/** The service's body limit: a larger file could never be sent. */
const MAX_FILE_BYTES = 64 * 1024;

/** The JSON object in `--file`, read only after its size is known to be sendable. */
function readStrategyFile(file: string, fields: readonly string[]): Record<string, unknown> {
  const refuse = (reason: string | Suggesting) =>
    new CliError(
      typeof reason === 'string'
        ? `--file ${file}: ${reason}`
        : { text: `--file ${file}: ${reason.text}`, quiet: `--file ${file}: ${reason.quiet}` },
      EXIT.usage,
    );
  let size: number;
  try {
    const stats = statSync(file);
    if (stats.isDirectory()) throw refuse('is a directory; give a JSON file');
    size = stats.size;
  } catch (error) {
    if (error instanceof CliError) throw error;
    const code = (error as NodeJS.ErrnoException).code;
    throw refuse(
      code === 'ENOENT'
        ? 'no such file'
        : code === 'EACCES'
          ? 'not readable (permission denied)'
          : `cannot read it (${code ?? (error as Error).message})`,
    );
  }
  if (size > MAX_FILE_BYTES) {
    throw refuse(`is ${size} bytes; a strategy is at most 64 KiB (the service's body limit)`);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(file, 'utf8'));
  } catch (error) {
    const where = /line (\d+) column (\d+)/.exec((error as Error).message);
    throw refuse(`not valid JSON${where ? ` (line ${where[1]}, column ${where[2]})` : ''}`);
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    throw refuse('must hold a JSON object');
  }
  // A misspelt field would otherwise be dropped and its default submitted.
  const unknown = Object.keys(parsed).filter((key) => !fields.includes(key));
  if (unknown.length > 0) {
    throw refuse(
      suggesting(
        (suggest) =>
          `${unknown
            .map((key) => `unknown field ${JSON.stringify(key)}${suggest(key, fields)}`)
            .join('; ')} (fields: ${fields.join(', ')})`,
      ),
    );
  }
  return parsed as Record<string, unknown>;
}

/**
 * The request body from --file and the flags (flags win over the file), checked against the
 * contract. Every problem is found before any is reported: an unreadable file, a flag that is
 * not a number, a missing name or description and every out-of-range value, each named as the
 * user gave it (the flag, or the file's field).
 */
async function checkedRequest(options: StrategySubmitOptions) {
  const { StrategySubmitRequest } = await import('../../../api/schemas/index.ts');
  /** Each problem, with its did-you-means and without (for --quiet). */
  const problems: Suggesting[] = [];
  const problem = (text: string) => problems.push({ text, quiet: text });
  let body: Record<string, unknown> = {};
  let fileRead = true;
  if (options.file) {
    try {
      body = readStrategyFile(options.file, Object.keys(StrategySubmitRequest.shape));
    } catch (error) {
      if (!(error instanceof CliError)) throw error;
      problems.push({ text: error.message, quiet: error.quietMessage });
      fileRead = false;
    }
  }
  /** Each field a flag set: the flag, as it is named in a problem, and its value as typed. */
  const flags = new Map<string, string>();
  const given = (field: string, flag: string, value: unknown, typed = String(value)) => {
    body[field] = value;
    // A long text is not repeated back (a description may be 2000 characters).
    flags.set(field, typed.length <= 40 && !typed.includes('\n') ? `${flag} ${typed}` : flag);
  };
  if (options.name !== undefined) given('name', '--name', options.name);
  if (options.description !== undefined) given('description', '--description', options.description);
  if (options.dna !== undefined) given('dna_string', '--dna', options.dna);
  /** Fields already reported: the contract's check says nothing more about them. */
  const reported = new Set<string>();
  for (const [flag, field] of Object.entries(NUMERIC_FLAGS)) {
    const value = options[flag as keyof typeof NUMERIC_FLAGS];
    if (value === undefined) continue;
    const flagName = `--${flag.replace(/[A-Z]/g, (letter) => `-${letter.toLowerCase()}`)}`;
    if (/^\d+$/.test(value)) {
      given(field, flagName, Number(value), value);
    } else {
      problem(`${flagName} ${value}: must be a whole number`);
      delete body[field];
      reported.add(field);
    }
  }
  if (options.flashLoans !== undefined) {
    body.flash_loans_enabled = options.flashLoans;
  }
  for (const [flag, field] of [
    ['--name', 'name'],
    ['--description', 'description'],
  ] as const) {
    if (body[field] !== undefined) continue;
    // A file that could not be read may hold it: its problem is reported already.
    if (fileRead) problem(`missing ${flag} (or give ${field} in --file)`);
    reported.add(field);
  }
  const parsed = StrategySubmitRequest.safeParse(body);
  for (const issue of parsed.error?.issues ?? []) {
    const field = String(issue.path[0] ?? '');
    if (reported.has(field)) continue;
    const where = flags.get(field) ?? `${issue.path.join('.') || 'strategy'} (from --file)`;
    problem(`${where}: ${issue.message}`);
  }
  if (problems.length > 0 || !parsed.success) {
    const joined = (part: keyof Suggesting) => problems.map((each) => each[part]).join('; ');
    throw new CliError({ text: joined('text'), quiet: joined('quiet') }, EXIT.usage);
  }
  return { body, request: parsed.data };
}

/** Checks the strategy (every problem at once), then prints it (--dry-run) or submits it. */
export async function run(options: StrategySubmitOptions, context: Context): Promise<void> {
  const { body, request } = await checkedRequest(options);
  const out = await context.output();
  if (options.dryRun) {
    if (out.json) return out.jsonValue(request);
    out.info('dry run: the request is valid; nothing was sent');
    return out.fields(strategyFields(request));
  }
  const client = await context.authenticatedClient();
  const response = await out.progress('waiting for the submission to confirm', () =>
    client.submitStrategy(body),
  );
  out.writeResult(response, (result) => {
    // Within 80 columns: a 100-character name wraps; the 66-character id and hashes get lines
    // of their own.
    for (const line of wrapText(
      `submitted "${result.strategy_name}" (${result.status})`,
      TABLE_WIDTH,
    )) {
      out.print(line);
    }
    out.fields({
      strategy: result.strategy_id,
      dna: result.dna_string,
      tx: result.tx_hash,
      block: `${result.block_number} (gas ${result.gas_used})`,
    });
  });
}

export function submitCommand(): Command {
  return new Command('submit')
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
    .option(
      '--no-flash-loans',
      'do not allow flash loans (overrides flash_loans_enabled in --file)',
    )
    .addOption(new Option('--file <file>', 'a JSON object with the API field names'))
    .option('--dry-run', 'check and print the request, send nothing')
    .addHelpText(
      'after',
      `\nExamples:\n  agentctl strategy submit --name "Mean reversion" \\\n    --description "Buys dips, sells rips." --max-leverage 300\n  agentctl strategy submit --file strategy.json --dry-run`,
    )
    .action(action((context, command) => run(command.opts<StrategySubmitOptions>(), context)));
}
