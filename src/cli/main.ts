import { Command, CommanderError } from 'commander';
import { VERSION } from '../version.ts';
import { serveCommand } from './commands/serve.ts';
import { CliError, EXIT, EXIT_CODE_HELP } from './exit-codes.ts';

/** The command tree. Command modules import only commander up front; work loads lazily. */
export function buildProgram(): Command {
  const program = new Command('agentctl')
    .description(
      'Operate software agents on the agent-vault protocol (Base Sepolia, chain id 84532), ' +
        'against the live service or the local sandbox (agentctl serve).',
    )
    .version(VERSION, '-V, --version')
    .addHelpText('after', EXIT_CODE_HELP)
    .showHelpAfterError('(run with --help for usage)')
    .addCommand(serveCommand());
  forEachCommand(program, (command) => command.exitOverride());
  return program;
}

/** Settings such as exitOverride are not inherited by commands added with addCommand(). */
function forEachCommand(command: Command, apply: (command: Command) => void): void {
  apply(command);
  for (const sub of command.commands) forEachCommand(sub, apply);
}

/** Maps any error to one line on stderr and an exit code, in one place. */
export function exitCodeFor(error: unknown, writeError: (line: string) => void): number {
  if (error instanceof CommanderError) {
    // Commander has already printed its message (or the help/version text).
    if (error.code === 'commander.helpDisplayed' || error.code === 'commander.version')
      return EXIT.ok;
    if (error.code === 'commander.help') return EXIT.ok;
    return EXIT.usage;
  }
  if (error instanceof CliError) {
    writeError(`agentctl: ${error.message}`);
    return error.exitCode;
  }
  writeError(
    `agentctl: unexpected error: ${error instanceof Error ? error.message : String(error)}`,
  );
  return EXIT.failure;
}

export async function main(argv: string[]): Promise<void> {
  const program = buildProgram();
  if (argv.length <= 2) {
    // No command is a usage error: help goes to stderr so scripts do not mistake it for output.
    program.outputHelp({ error: true });
    process.exitCode = EXIT.usage;
    return;
  }
  try {
    await program.parseAsync(argv);
  } catch (error) {
    process.exitCode = exitCodeFor(error, (line) => process.stderr.write(`${line}\n`));
  }
}
