import { Command, CommanderError, InvalidArgumentError, type Option } from 'commander';
import { idempotencyKeyProblem } from '../api/idempotency.ts';
import { VERSION } from '../version.ts';
import { apiCommand } from './commands/api/index.ts';
import { completionCommand } from './commands/completion.ts';
import { configCommand } from './commands/config/index.ts';
import { dataCommand } from './commands/data/index.ts';
import { depositCommand } from './commands/deposit.ts';
import { doctorCommand } from './commands/doctor.ts';
import { eligibilityCommand } from './commands/eligibility.ts';
import { faucetCommand } from './commands/faucet.ts';
import { healthCommand } from './commands/health.ts';
import { keysCommand } from './commands/keys/index.ts';
import { leaderboardCommand } from './commands/leaderboard.ts';
import { lookupCommand } from './commands/lookup.ts';
import { nftsCommand } from './commands/nfts.ts';
import { positionsCommand } from './commands/positions.ts';
import { proposalsCommand } from './commands/proposals.ts';
import { registerCommand } from './commands/register.ts';
import { sandboxCommand } from './commands/sandbox/index.ts';
import { serveCommand } from './commands/serve/index.ts';
import { statsCommand } from './commands/stats.ts';
import { strategyCommand } from './commands/strategy/index.ts';
import { vaultsCommand } from './commands/vaults.ts';
import { voteCommand } from './commands/vote.ts';
import { walletCommand } from './commands/wallet.ts';
import { watchCommand } from './commands/watch/index.ts';
import { whoamiCommand } from './commands/whoami.ts';
import { describeFailure } from './errors.ts';
import { EXIT, EXIT_CODE_HELP } from './exit-codes.ts';
import { closest } from './suggest.ts';

/** Within 80 columns, as all help is. */
const ENVIRONMENT_HELP = `
Environment:
  AGENTCTL_BASE_URL, AGENTCTL_API_KEY, AGENTCTL_PROFILE
                         defaults for the flags above
  AGENTCTL_DATA_URL      the data API's URL for \`agentctl data\`, \`watch\` and
                         \`api graphql\` (default: the base URL)
  AGENTCTL_CONFIG_DIR    where profiles and keystores live
                         (default: ~/.config/agentctl)
  NO_COLOR, FORCE_COLOR  colour off / on
`;

/** The top-level commands, in the order help lists them. */
const COMMANDS: ReadonlyArray<readonly [string, () => Command]> = [
  ['keys', keysCommand],
  ['register', registerCommand],
  ['whoami', whoamiCommand],
  ['health', healthCommand],
  ['doctor', doctorCommand],
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
const GLOBAL_VALUE_OPTIONS = new Set(['--profile', '--base-url', '--api-key', '--idempotency-key']);
const GLOBAL_FLAGS = new Set(['--json', '--no-color', '--quiet', '--verbose']);

/** --idempotency-key, checked as the service checks it: 1 to 255 printable ASCII characters. */
function idempotencyKeyArgument(key: string): string {
  const problem = idempotencyKeyProblem(key);
  if (problem) throw new InvalidArgumentError(problem);
  return key;
}

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
export function buildProgram(only?: string, args: readonly string[] = []): Command {
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
    .option(
      '--idempotency-key <key>',
      'the Idempotency-Key of the write (default: a new UUID); a write whose outcome was unknown is finished by running it again with its key',
      idempotencyKeyArgument,
    )
    .option('--json', "print the service's JSON as received; errors as one JSON object on stderr")
    .option('--no-color', 'no colour (also NO_COLOR)')
    .option('-q, --quiet', 'no progress or hints on stderr')
    .option('-v, --verbose', 'show each HTTP exchange on stderr (with --json, retries too)')
    .addHelpText('after', ENVIRONMENT_HELP + EXIT_CODE_HELP);
  for (const [name, create] of COMMANDS) {
    if (only === undefined || only === name) program.addCommand(create());
  }
  const { json, quiet } = usageFlags(args);
  forEachCommand(program, (command) => {
    // Usage errors in the voice of every other error: "agentctl: …", then the hint alone;
    // with --quiet only the first line, without a did-you-mean; with --json one JSON object.
    const report = (usage: Usage, write: (text: string) => void) => {
      if (json) {
        const { message, suggestion, hint } = usage;
        const hints = [suggestion, hint].filter(Boolean).join('; ');
        write(
          `${JSON.stringify({ error: message, ...(hints && { hint: hints }), status: null, code: 'usage' })}\n`,
        );
      } else if (quiet) write(`agentctl: ${usage.message}\n`);
      else {
        const { message, suggestion, hint } = usage;
        write(
          `agentctl: ${message}${suggestion ? ` (${suggestion})` : ''}\n${hint ? `${hint}\n` : ''}(run \`${commandPath(command)} --help\` for usage)\n`,
        );
      }
    };
    // Descriptions wrap within 80 columns even beside a long term (commander's own minimum
    // width to wrap, 40, left the top-level help 134 wide).
    command.configureHelp({ minWidthToWrap: 20 });
    command.exitOverride().configureOutput({
      outputError: (text, write) =>
        report(usageError(text.trimEnd(), command, program, args), write),
    });
    if (json && command.commands.length > 0) {
      // A group without its subcommand: commander prints the whole help on stderr; with --json
      // stderr gets one JSON object, as for every usage error.
      const help = command.help.bind(command);
      command.help = ((context?: { error?: boolean }) => {
        if (!context?.error) return help(context as { error: boolean } | undefined);
        const path = commandPath(command);
        report(
          {
            message: `${path} needs a command`,
            hint: `run \`${path} --help\` for its commands`,
          },
          (text) => (command.configureOutput().writeErr ?? process.stderr.write)(text),
        );
        throw new CommanderError(EXIT.usage, 'commander.help', `${path} needs a command`);
      }) as Command['help'];
    }
  });
  return program;
}

/**
 * A usage error as we say it: one line, a did-you-mean for a near miss (left out by --quiet),
 * and a hint for a line of its own.
 */
interface Usage {
  message: string;
  suggestion?: string | undefined;
  hint?: string | undefined;
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

/** --json and --quiet as given anywhere before `--` (usage errors come before any parsing). */
function usageFlags(args: readonly string[]): { json: boolean; quiet: boolean } {
  const end = args.indexOf('--');
  const given = end === -1 ? args : args.slice(0, end);
  return {
    json: given.includes('--json'),
    quiet: given.some((arg) => arg === '--quiet' || /^-[qv]*q[qv]*$/.test(arg)),
  };
}

/**
 * Commander's usage error as one line in our voice, and its "(Did you mean …?)" as a hint:
 * "error: unknown command 'depost'\n(Did you mean deposit?)". `command` is the one that
 * failed (for its name, arguments and options).
 */
export function usageMessage(text: string, command?: Command): Usage {
  const lines = text.replace(/^error: /, '').split('\n');
  const hint = lines
    .slice(1)
    .map((line) => /^\(Did you mean (.+)\?\)$/.exec(line.trim())?.[1])
    .find(Boolean);
  const first = lines[0] ?? '';
  return {
    ...(hint && { hint: `did you mean ${hint}?` }),
    ...(command ? commanderInOurVoice(first, command) : { message: first }),
  };
}

/** The long name of an option as commander names it ("--risk <level>" → "--risk"). */
function optionName(flags: string): string {
  return /--[\w-]+/.exec(flags)?.[0] ?? flags.split(/[ ,]/)[0] ?? flags;
}

/** Commander's reason for a bad value ("Allowed choices are a, b.") in our words. */
function reasonFor(
  value: string,
  reason: string,
  choices: readonly string[] | undefined,
): Pick<Usage, 'message' | 'suggestion'> {
  if (choices && /^Allowed choices are /.test(reason)) {
    const near = closest(value, choices);
    return {
      message: `must be one of ${choices.join(', ')}`,
      ...(near && { suggestion: `did you mean ${near}?` }),
    };
  }
  return { message: reason };
}

/**
 * Each of commander's usage messages (node_modules/commander/lib/command.js: error(),
 * _callParseArg, missingArgument, optionMissingArgument, missingMandatoryOptionValue,
 * _conflictingOption, _excessArguments) said as ours: what was given, then what is wanted.
 * Unknown options and commands stay as commander says them (their hints come apart).
 */
function commanderInOurVoice(line: string, command: Command): Usage {
  const path = commandPath(command);
  const name = command.name();
  const findOption = (flags: string) =>
    command.options.find((option) => option.flags === flags) ??
    command.parent?.options.find((option) => option.flags === flags);
  let match = /^option '([^']+)' argument '(.*)' is invalid\. (.*)$/s.exec(line);
  if (match) {
    const [, flags = '', value = '', reason = ''] = match;
    const said = reasonFor(value, reason, findOption(flags)?.argChoices);
    return { ...said, message: `${optionName(flags)} ${value}: ${said.message}` };
  }
  match = /^option '([^']+)' value '(.*)' from env '([^']+)' is invalid\. (.*)$/s.exec(line);
  if (match) {
    const [, flags = '', value = '', env = '', reason = ''] = match;
    const said = reasonFor(value, reason, findOption(flags)?.argChoices);
    return { ...said, message: `${env} ${value} (for ${optionName(flags)}): ${said.message}` };
  }
  match = /^command-argument value '(.*)' is invalid for argument '([^']+)'\. (.*)$/s.exec(line);
  if (match) {
    const [, value = '', name = '', reason = ''] = match;
    const argument = command.registeredArguments.find((known) => known.name() === name);
    const said = reasonFor(value, reason, argument?.argChoices);
    return { ...said, message: `${name} ${value}: ${said.message}` };
  }
  match = /^missing required argument '([^']+)'$/.exec(line);
  if (match) {
    return { message: `${name} needs <${match[1]}>: ${path} ${argumentsUsage(command)}` };
  }
  match = /^option '([^']+)' argument missing$/.exec(line);
  if (match) {
    const flags = match[1] ?? '';
    return {
      message: `${optionName(flags)} needs a value: ${optionName(flags)} ${valuePlaceholder(flags)}`,
    };
  }
  match = /^required option '([^']+)' not specified$/.exec(line);
  if (match) {
    const flags = match[1] ?? '';
    return { message: `${name} needs ${optionName(flags)} ${valuePlaceholder(flags)}`.trimEnd() };
  }
  match = /^(.+) cannot be used with (.+)$/.exec(line);
  if (match) {
    const [first, second] = [match[1] ?? '', match[2] ?? ''].map(conflictName);
    const option = command.options.find((known) => optionName(known.flags) === first);
    return {
      message: `${first} and ${second} cannot be used together${option?.description ? ` (${first}: ${option.description})` : ''}`,
    };
  }
  match =
    /^too many arguments(?: for '[^']+')?\. Expected (\d+) arguments? but got \d+: (.*)\.$/s.exec(
      line,
    );
  if (match) {
    const given = (match[2] ?? '')
      .split(', ')
      .map((arg) => JSON.stringify(arg))
      .join(' ');
    return {
      message:
        match[1] === '0'
          ? `${name} takes no arguments (got ${given})`
          : `${name} takes ${match[1]} argument${match[1] === '1' ? '' : 's'}: ${path} ${argumentsUsage(command)} (got ${given})`,
    };
  }
  return { message: line };
}

/** "<wallet>" or "<vault> <amount>": a command's arguments as its usage line shows them. */
function argumentsUsage(command: Command): string {
  return command.registeredArguments
    .map((argument) => (argument.required ? `<${argument.name()}>` : `[${argument.name()}]`))
    .join(' ');
}

/** "<name>" of "--profile <name>"; "" for a flag. */
function valuePlaceholder(flags: string): string {
  return /[<[][^>\]]+[>\]]/.exec(flags)?.[0] ?? '';
}

/** "option '--all'" → "--all"; "environment variable 'X'" → "X". */
function conflictName(text: string): string {
  const option = /^option '([^']+)'$/.exec(text)?.[1];
  if (option) return optionName(option);
  return /^environment variable '([^']+)'$/.exec(text)?.[1] ?? text;
}

/**
 * usageMessage(), and for an unknown option that another command has (`agentctl
 * --admin-token X sandbox info`), where it goes instead of a did-you-mean.
 */
function usageError(
  text: string,
  command: Command,
  program: Command,
  args: readonly string[],
): Usage {
  const usage = usageMessage(text, command);
  // `--admin-token=SECRET`: the option is named, its value (perhaps a secret) is not echoed.
  usage.message = usage.message.replace(/^(unknown option '[^'=]+)=[^']*'/, "$1'");
  const flag = /^unknown option '([^'=]+)/.exec(usage.message)?.[1];
  const placement = flag === undefined ? undefined : placementHint(flag, program, args);
  return placement ? { ...usage, hint: placement } : usage;
}

/**
 * "--admin-token is an option of `agentctl sandbox`: agentctl sandbox --admin-token <token>
 * info": the commands that have `flag`, and the command line with it moved after the one it
 * names (its value shown as a placeholder: it may be a secret).
 */
export function placementHint(
  flag: string,
  program: Command,
  args: readonly string[],
): string | undefined {
  const owners: Array<{ path: string[]; option: Option }> = [];
  forEachCommand(program, (command) => {
    const option = command.options.find((known) => known.long === flag || known.short === flag);
    if (option && command !== program)
      owners.push({ path: commandPath(command).split(' ').slice(1), option });
  });
  if (owners.length === 0) return undefined;
  const at = args.findIndex((arg) => arg === flag || arg.startsWith(`${flag}=`));
  for (const { path, option } of owners) {
    if (at === -1) break;
    const takesValue = option.required || option.optional;
    const rest = [...args];
    rest.splice(at, takesValue && !(args[at] as string).includes('=') ? 2 : 1);
    // Where the owner's last name is, its names in order among the arguments.
    let named = -1;
    for (const name of path) {
      named = rest.indexOf(name, named + 1);
      if (named === -1) break;
    }
    if (named === -1) continue;
    const placed = takesValue
      ? [flag, `<${option.flags.match(/[<[]([^>\]]+)[>\]]/)?.[1] ?? 'value'}>`]
      : [flag];
    rest.splice(named + 1, 0, ...placed);
    return `${flag} is an option of \`agentctl ${path.join(' ')}\`: agentctl ${rest.join(' ')}`;
  }
  const names = owners.slice(0, 3).map(({ path }) => `\`agentctl ${path.join(' ')}\``);
  return `${flag} is an option of ${names.join(', ')}${owners.length > 3 ? ' and others' : ''}: give it after the command's name`;
}

/**
 * Maps any error to an exit code, in one place, and reports it on stderr: one line, or with
 * --json one JSON object (stdout stays empty).
 */
export function exitCodeFor(
  error: unknown,
  writeError: (line: string) => void,
  json = false,
  quiet = false,
): number {
  if (error instanceof CommanderError) {
    // --help and --version end here with exit code 0. Anything else is a usage error that
    // commander has printed already, in our voice (buildProgram's outputError).
    return error.exitCode === 0 ? EXIT.ok : EXIT.usage;
  }
  const failure = describeFailure(error, quiet && !json);
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
  const program = buildProgram(namedCommand(argv.slice(2)), argv.slice(2));
  if (argv.length <= 2) {
    // No command is a usage error: help goes to stderr so scripts do not mistake it for output.
    program.outputHelp({ error: true });
    process.exitCode = EXIT.usage;
    return;
  }
  const { json, quiet } = usageFlags(argv.slice(2));
  try {
    await program.parseAsync(argv);
  } catch (error) {
    process.exitCode = exitCodeFor(error, (line) => process.stderr.write(`${line}\n`), json, quiet);
  }
}
