import { readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join, resolve } from 'node:path';
import type { Command } from 'commander';
import { CliError, EXIT } from './exit-codes.ts';

/**
 * The state directory `serve --detach`, `serve stop`, `serve status` and `serve logs` share:
 * a sandbox in the background that a script can start, query and stop by its directory,
 * whatever started it (npx's child is re-parented, so `kill $!` on `npx agentctl serve &`
 * never reached it).
 */

/** The state directory `serve --detach` and its subcommands use when --state is not given. */
export function defaultStateDir(env: NodeJS.ProcessEnv = process.env): string {
  const base = env.XDG_STATE_HOME || join(homedir(), '.local', 'state');
  return join(base, 'agentctl', 'sandbox');
}

/** --state DIR, resolved, or the default. */
export function stateDirOf(state: string | undefined): string {
  return resolve(state ?? defaultStateDir());
}

/** Adds `--state <dir>` to a serve subcommand (serve itself has its own, with another text). */
export function stateOption(command: Command): Command {
  return command.option(
    '--state <dir>',
    `the sandbox's state directory (default: ${defaultStateDir().replace(homedir(), '~')})`,
  );
}

/**
 * --state before or after a subcommand's name (`serve --state D stop`, `serve stop --state D`).
 * stop, status and logs cover a sandbox in a state dir (its pid and log files): one kept in a
 * database (--database, --replica) is refused rather than looked for in the default directory.
 */
export function stateOf(command: Command): string | undefined {
  const given = command.optsWithGlobals<{ state?: string; database?: string; replica?: boolean }>();
  if (given.database !== undefined || given.replica) {
    throw new CliError(
      `serve ${command.name()} covers a sandbox in a state dir: a writer or replica on a database (--database, --replica) keeps no pid or log file there; ask its /health (or GET /sandbox/info), and stop it with a signal or its service manager`,
      EXIT.usage,
    );
  }
  return given.state;
}

export const sleep = (ms: number) => new Promise((done) => setTimeout(done, ms));

/** A file's text from a byte offset; '' when it cannot be read (yet). */
export function readFrom(path: string, offset: number): string {
  try {
    return readFileSync(path).subarray(offset).toString('utf8');
  } catch {
    return '';
  }
}
