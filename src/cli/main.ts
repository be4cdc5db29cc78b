import { Command, CommanderError } from 'commander';
import { VERSION } from '../version.ts';
import { apiCommand } from './commands/api/index.ts';
import { completionCommand } from './commands/completion.ts';
import { configCommand } from './commands/config.ts';
import { dataCommand } from './commands/data.ts';
import { depositCommand } from './commands/deposit.ts';
import { healthCommand } from './commands/health.ts';
import { keysCommand } from './commands/keys.ts';
import { leaderboardCommand } from './commands/leaderboard.ts';
import { lookupCommand } from './commands/lookup.ts';
import { nftsCommand } from './commands/nfts.ts';
import { positionsCommand } from './commands/positions.ts';
import { proposalsCommand } from './commands/proposals.ts';
import { registerCommand, whoamiCommand } from './commands/register.ts';
import { sandboxCommand } from './commands/sandbox.ts';
import { serveCommand } from './commands/serve.ts';
import { statsCommand } from './commands/stats.ts';
import { strategyCommand } from './commands/strategy/index.ts';
import { vaultsCommand } from './commands/vaults.ts';
import { voteCommand } from './commands/vote.ts';
import { eligibilityCommand, faucetCommand, walletCommand } from './commands/wallet.ts';
import { watchCommand } from './commands/watch/index.ts';
import { describeFailure } from './errors.ts';
import { EXIT, EXIT_CODE_HELP } from './exit-codes.ts';

const ENVIRONMENT_HELP = `
Environment:
  AGENTCTL_BASE_URL, AGENTCTL_API_KEY, AGENTCTL_PROFILE   defaults for the flags above
  AGENTCTL_DATA_URL     the data API's URL for \`agentctl data\`, \`watch\` and \`api graphql\` (default: the base URL)
  AGENTCTL_CONFIG_DIR   where profiles and keystores live (default: ~/.config/agentctl)
  NO_COLOR, FORCE_COLOR  colour off / on
`;

/** The top-level commands, in the order help lists them. */
const COMMANDS: ReadonlyArray<readonly [string, () => Command]> = [
  ['keys', keysCommand],
  ['register', registerCommand],
  ['whoami', whoamiCommand],
  ['health', healthCommand],
  ['vaults', vaultsCommand],
  ['leaderboard', leaderboardCommand],
  ['stats', statsCommand],
  ['lookup', lookupCommand],
  ['proposals', proposalsCommand],
  ['positions', positionsCommand],
  ['nfts', nftsCommand],
  ['wallet', walletCommand],
  ['deposit', depositCommand],
  ['strategy', strategyCommand],
  ['vote', voteCommand],
  ['faucet', faucetCommand],
  ['data', dataCommand],
  ['watch', watchCommand],
  ['eligibility', eligibilityCommand],
  ['api', apiCommand],
  ['config', configCommand],
  // Completion describes every command, so it gets a whole tree of its own.
  ['completion', () => completionCommand(() => buildProgram())],
  ['sandbox', sandboxCommand],
  ['serve', serveCommand],
];

/** The global options, as they may appear before a command's name. */
const GLOBAL_VALUE_OPTIONS = new Set(['--profile', '--base-url', '--api-key']);
const GLOBAL_FLAGS = new Set(['--json', '--no-color', '--quiet', '--verbose']);

/**
 * The command an argument list names (`agentctl --json vaults` names vaults), when it is one
 * of ours and only global options come before it; undefined for help (`-h`, also inside
 * `-qh`), a typo or anything unusual, which need the whole tree.
 */
export function namedCommand(args: readonly string[]): string | undefined {
  for (let i = 0; i < args.length; i++) {
    const arg = args[i] as string;
    if (!arg.startsWith('-')) return COMMANDS.some(([name]) => name === arg) ? arg : undefined;
    if (GLOBAL_VALUE_OPTIONS.has(arg)) i++;
    else if (GLOBAL_FLAGS.has(arg) || /^-[qv]+$/.test(arg)) continue;
    else if (!GLOBAL_VALUE_OPTIONS.has(arg.split('=')[0] as string)) return undefined;
  }
  return undefined;
}

/**
 * The command tree. Command modules import only commander up front; work loads lazily.
 * With `only`, the tree holds just that command (under the same global options): building
 * all of them is a tenth of a quick command's run time.
 */
export function buildProgram(only?: string): Command {
  const program: Command = new Command('agentctl')
    .description(
      'Operate software agents on the agent-vault protocol (Base Sepolia, chain id 84532), ' +
        'against the live service or the local sandbox (agentctl serve).',
    )
    .version(VERSION, '-V, --version')
    .option('--profile <name>', 'profile to use (env AGENTCTL_PROFILE; default "default")')
    .option(
      '--base-url <url>',
      "service base URL (env AGENTCTL_BASE_URL; default: the profile's, else http://127.0.0.1:8787)",
    )
    .option('--api-key <key>', "API key (env AGENTCTL_API_KEY; default: the profile's)")
    .option('--json', "print the service's JSON as received; errors as one JSON object on stderr")
    .option('--no-color', 'no colour (also NO_COLOR)')
    .option('-q, --quiet', 'no progress or hints on stderr')
    .option('-v, --verbose', 'show retries and other details on stderr')
    .addHelpText('after', ENVIRONMENT_HELP + EXIT_CODE_HELP);
  for (const [name, create] of COMMANDS) {
    if (only === undefined || only === name) program.addCommand(create());
  }
  forEachCommand(program, (command) =>
    command.exitOverride().configureOutput({
      // Usage errors in the voice of every other error: "agentctl: …", then the hint alone.
      outputError: (text, write) => {
        const { message, hint } = usageMessage(text.trimEnd());
        write(
          `agentctl: ${message}\n${hint ? `${hint}\n` : ''}(run \`${command.name() === 'agentctl' ? 'agentctl' : commandPath(command)} --help\` for usage)\n`,
        );
      },
    }),
  );
  return program;
}

/** "agentctl strategy submit" for a command. */
function commandPath(command: Command): string {
  const names: string[] = [];
  for (let at: Command | null = command; at; at = at.parent) names.unshift(at.name());
  return names.join(' ');
}

/** Settings such as exitOverride are not inherited by commands added with addCommand(). */
function forEachCommand(command: Command, apply: (command: Command) => void): void {
  apply(command);
  for (const sub of command.commands) forEachCommand(sub, apply);
}

/**
 * Commander's usage error as one line in our voice, and its "(Did you mean …?)" as a hint:
 * "error: unknown command 'depost'\n(Did you mean deposit?)".
 */
export function usageMessage(text: string): { message: string; hint?: string } {
  const lines = text.replace(/^error: /, '').split('\n');
  const hint = lines
    .slice(1)
    .map((line) => /^\(Did you mean (.+)\?\)$/.exec(line.trim())?.[1])
    .find(Boolean);
  return { message: lines[0] ?? '', ...(hint && { hint: `did you mean ${hint}?` }) };
}

/**
 * Maps any error to an exit code, in one place, and reports it on stderr: one line, or with
 * --json one JSON object (stdout stays empty).
 */
export function exitCodeFor(
  error: unknown,
  writeError: (line: string) => void,
  json = false,
): number {
  if (error instanceof CommanderError) {
    // --help and --version end here with exit code 0. Anything else is a usage error:
    // commander has printed it already (in our voice), except with --json, where it is one
    // JSON object.
    if (error.exitCode === 0) return EXIT.ok;
    if (json) {
      const { message, hint } = usageMessage(error.message);
      writeError(
        JSON.stringify({ error: message, ...(hint && { hint }), status: null, code: 'usage' }),
      );
    }
    return EXIT.usage;
  }
  const failure = describeFailure(error);
  if (json) {
    // One line per error object: a message that spans lines is joined.
    const text = String(failure.json.error ?? '').replace(/\s*\n\s*/g, '; ');
    writeError(JSON.stringify({ ...failure.json, error: text }));
  } else {
    writeError(`agentctl: ${failure.message}`);
  }
  return failure.exitCode;
}

export async function main(argv: string[]): Promise<void> {
  // `agentctl vaults | head`: a reader that leaves early is not an error.
  for (const stream of [process.stdout, process.stderr]) {
    stream.on('error', (error: NodeJS.ErrnoException) => {
      if (error.code === 'EPIPE') process.exit(process.exitCode ?? 0);
      throw error;
    });
  }
  const program = buildProgram(namedCommand(argv.slice(2)));
  if (argv.length <= 2) {
    // No command is a usage error: help goes to stderr so scripts do not mistake it for output.
    program.outputHelp({ error: true });
    process.exitCode = EXIT.usage;
    return;
  }
  // Known before parsing, so that commander's own usage errors can be JSON too.
  const json = argv.slice(2).includes('--json');
  if (json) {
    forEachCommand(program, (command) => command.configureOutput({ outputError: () => undefined }));
  }
  try {
    await program.parseAsync(argv);
  } catch (error) {
    process.exitCode = exitCodeFor(error, (line) => process.stderr.write(`${line}\n`), json);
  }
}
