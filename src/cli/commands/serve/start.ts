import { spawn } from 'node:child_process';
import { closeSync, mkdirSync, openSync, statSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import type { SandboxOptions } from '../../../sandbox/options.ts';
import {
  SERVE_LOG_FILE as LOG_FILE,
  TEMPORARY_STATE_ENV,
  TOKEN_FD_ENV,
  TOKEN_NOT_LOGGED,
} from '../../../sandbox/options.ts';
import type { Context } from '../../context.ts';
import { CliError, EXIT } from '../../exit-codes.ts';
import { readFrom, sleep, stateDirOf } from '../../serve-dir.ts';

/** `agentctl serve`: the sandbox's options, plus how to run it. */
export interface ServeOptions extends SandboxOptions {
  /** Run in the background (serve again, detached), logging to STATE/serve.log. */
  detach: boolean;
  /** The command line after `agentctl`, which --detach runs again without --detach. */
  argv: string[];
  /** `database` came from AGENTCTL_DATABASE_URL, not --database: refusals name the variable. */
  databaseFromEnv?: boolean;
}

/** How long `serve --detach` waits for the ready line. */
const READY_TIMEOUT_MS = 60_000;
/** The ready block's last line: serve is listening once it is printed. */
const READY_LINE = /agentctl sandbox listening on (\S+)/;

/**
 * Starts the sandbox: in the foreground until SIGINT or SIGTERM (the ready block on stdout,
 * the log and notices on stderr), or, with --detach, in the background.
 */
export async function run(options: ServeOptions, context: Context): Promise<void> {
  if (options.adminToken !== undefined && options.adminToken.trim() === '') {
    throw new CliError(
      'the admin token (--admin-token or AGENTCTL_ADMIN_TOKEN) is empty: set a value, or unset it to have one generated',
      EXIT.usage,
    );
  }
  const { automaticCheckpoints, CHECKPOINTS_ENV } = await import(
    '../../../sandbox/chain/checkpoint-mode.ts'
  );
  if (automaticCheckpoints() === undefined) {
    throw new CliError(
      `${CHECKPOINTS_ENV}=${process.env[CHECKPOINTS_ENV]} is not a checkpoint mode: set it to manual (no automatic checkpoints, for tests and the bench), or unset it`,
      EXIT.usage,
    );
  }
  if (options.database !== undefined) await checkDatabaseUse(options);
  else if (options.replica) {
    throw new CliError(
      '--replica needs --database URL (or AGENTCTL_DATABASE_URL): the database its writer keeps',
      EXIT.usage,
    );
  } else if (options.advertiseUrl !== undefined) {
    throw new CliError(
      '--advertise-url is where replicas forward writes to a team sandbox’s writer: it needs --database',
      EXIT.usage,
    );
  }
  const out = await context.output();
  if (options.detach) {
    // The issue's CI recipe: `serve --from FILE --detach` gives a new sandbox every time.
    const temporary = options.fromFile !== undefined && options.state === undefined;
    const url = await detach(options.argv, options.state, temporary, out.print);
    // A sandbox honours Idempotency-Key: its first write may be retried too (see
    // docs/command-line-writes.md). Only a cache: a configuration that cannot be written is
    // no reason to fail a start that worked.
    const { originOf } = await import('../../../api/idempotency.ts');
    await context
      .config()
      .then((config) => config.rememberIdempotencyKeys(originOf(url)))
      .catch(() => undefined);
    return;
  }
  const { serveUntilSignalled } = await import('../../../sandbox/server.ts');
  const { StartupError } = await import('../../../sandbox/errors.ts');
  const { detach: _detach, argv: _argv, databaseFromEnv: _env, ...sandboxOptions } = options;
  const temporaryState = process.env[TEMPORARY_STATE_ENV] === '1';
  delete process.env[TEMPORARY_STATE_ENV];
  try {
    await serveUntilSignalled({ ...sandboxOptions, temporaryState }, out.print, tokenPipe());
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'EADDRINUSE') {
      throw new CliError(
        `port ${options.port} on ${options.host} is already in use: choose another with --port, or --port 0 for a free one`,
        EXIT.failure,
      );
    }
    // Only the listening socket's own errors: an EACCES from a file is a StartupError.
    const syscall = (error as NodeJS.ErrnoException).syscall;
    if ((code === 'EADDRNOTAVAIL' || code === 'EACCES') && syscall === 'listen') {
      throw new CliError(
        `cannot listen on ${options.host}:${options.port} (${code})`,
        EXIT.failure,
      );
    }
    // Another writer holds the sandbox's database: a supervisor may try again later (exit 3).
    if (options.database !== undefined) {
      const { WriterLockedError } = await import('../../../sandbox/database-state.ts');
      if (error instanceof WriterLockedError) throw new CliError(error.message, EXIT.writerLocked);
    }
    if (error instanceof StartupError) throw new CliError(error.message, EXIT.failure);
    throw error;
  }
}

/**
 * What is wrong with an --advertise-url, in words that do not repeat it: an http(s) URL without
 * a user or password (every replica reads it from the database; they forward a client's own
 * credentials, never the URL's).
 */
function advertiseUrlProblem(given: string): string | undefined {
  const url = URL.parse(given);
  if (url === null || (url.protocol !== 'http:' && url.protocol !== 'https:')) {
    return 'must be an http(s) URL, for example http://10.0.0.5:8787';
  }
  if (url.username !== '' || url.password !== '') {
    return 'must not hold a user or a password: it is recorded in the database for every replica to read';
  }
  return undefined;
}

/**
 * `--database URL` (or AGENTCTL_DATABASE_URL): a PostgreSQL URL, and none of the options that
 * mean a state dir. Exit 2 otherwise. The URL is never shown with its password.
 */
async function checkDatabaseUse(options: ServeOptions): Promise<void> {
  const { databaseUrlProblem, redactedUrl } = await import('../../../sandbox/database-state.ts');
  const url = options.database as string;
  const given = options.databaseFromEnv ? 'AGENTCTL_DATABASE_URL' : '--database';
  const problem = databaseUrlProblem(url);
  if (problem) throw new CliError(`${given} ${redactedUrl(url)} ${problem}`, EXIT.usage);
  // Checked here rather than by an option parser, whose message would repeat the value (and a
  // password in it).
  if (options.advertiseUrl !== undefined) {
    const problem = advertiseUrlProblem(options.advertiseUrl);
    if (problem) throw new CliError(`--advertise-url ${problem}`, EXIT.usage);
  }
  const conflicts: Array<[unknown, string, string]> = [
    [options.state, '--state', 'the database keeps the whole sandbox: there is no state dir'],
    [options.rpcUrl, '--rpc-url', 'a sandbox in a database runs its own chain'],
    [options.detach || undefined, '--detach', 'run it under a service manager (systemd, say)'],
  ];
  if (options.replica) {
    conflicts.push(
      [
        options.advertiseUrl,
        '--advertise-url',
        'only the writer records where it serves (a replica forwards writes there)',
      ],
      [options.fromFile, '--from', 'start the writer with --from, on a new database'],
    );
  }
  for (const [value, option, why] of conflicts) {
    if (value === undefined) continue;
    const unset = options.databaseFromEnv
      ? ' (unset AGENTCTL_DATABASE_URL for a sandbox without one)'
      : '';
    const what = options.replica ? `--replica ${given}` : given;
    throw new CliError(`${what} cannot be used with ${option}: ${why}${unset}`, EXIT.usage);
  }
}

/**
 * Starts `serve` again as a detached process with its output in STATE/serve.log, waits for
 * its ready line, prints what it printed, and returns its URL: the sandbox keeps running. A
 * `temporary` one (--from without --state) runs on the default state dir, where `serve stop`
 * finds it, and is removed from there when it stops.
 */
async function detach(
  argv: string[],
  state: string | undefined,
  temporary: boolean,
  print: (line: string) => void,
): Promise<string> {
  const dir = stateDirOf(state);
  try {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    throw new CliError(
      code === 'EEXIST' || code === 'ENOTDIR'
        ? `${dir} is not a directory; give --state a directory`
        : `cannot create the state directory ${dir} (${code ?? String(error)}); choose another --state directory`,
      EXIT.failure,
    );
  }
  const logPath = join(dir, LOG_FILE);
  const { serveUsing } = await import('../../../sandbox/state-dir.ts');
  const running = serveUsing(dir);
  if (running) {
    throw new CliError(
      `a sandbox is already running on ${dir}${running.pid ? ` (pid ${running.pid})` : ''}${running.url ? ` at ${running.url}` : ''}; stop it with \`agentctl serve stop --state ${dir}\``,
      EXIT.failure,
    );
  }
  const log = openSync(logPath, 'a', 0o600);
  const offset = statSync(logPath).size;
  const args = [
    ...process.execArgv,
    process.argv[1] as string,
    ...withoutDetach(argv),
    '--state',
    dir,
  ];
  // fd 3: a pipe for the admin token line, which must not go to the log file.
  const child = spawn(process.execPath, args, {
    detached: true,
    stdio: ['ignore', log, log, 'pipe'],
    env: {
      ...process.env,
      [TOKEN_FD_ENV]: '3',
      [TEMPORARY_STATE_ENV]: temporary ? '1' : undefined,
    },
  });
  closeSync(log);
  const tokenStream = child.stdio[3] as NodeJS.ReadableStream;
  let tokenText = '';
  let tokenDone = false;
  tokenStream.setEncoding('utf8');
  tokenStream.on('data', (chunk: string) => {
    tokenText += chunk;
  });
  tokenStream.on('end', () => {
    tokenDone = true;
  });
  tokenStream.on('error', () => {
    tokenDone = true;
  });
  const closeTokenPipe = () => (tokenStream as unknown as { destroy(): void }).destroy();
  let exited: number | null | undefined;
  child.on('exit', (code, signal) => {
    exited = code ?? (signal ? 128 : 1);
  });
  child.unref();
  const deadline = Date.now() + READY_TIMEOUT_MS;
  for (;;) {
    const output = readFrom(logPath, offset);
    const ready = READY_LINE.exec(output);
    // The token line comes through its pipe, closed before the ready line is printed.
    if (ready && (tokenDone || Date.now() > deadline)) {
      closeTokenPipe();
      const tokenLine = tokenText.trim();
      // The lines serve prints to stdout (admin token, state, chain, URL), not its JSON log.
      for (const line of output.split('\n')) {
        if (!line || line.startsWith('{')) continue;
        print(line === TOKEN_NOT_LOGGED && tokenLine ? tokenLine : line);
      }
      print(
        `running in the background as pid ${child.pid}; logs: ${logPath}\n${
          temporary
            ? 'stop (and remove) it with: agentctl serve stop'
            : `stop it with: agentctl serve stop --state ${dir}`
        }`,
      );
      return ready[1] as string;
    }
    if (exited !== undefined || Date.now() > deadline) {
      const lastLines = output.trim().split('\n').slice(-5).join('\n');
      closeTokenPipe();
      if (exited === undefined) child.kill('SIGTERM');
      throw new CliError(
        `${exited === undefined ? 'serve was not ready in time' : 'serve did not start'}; the end of ${logPath}:\n${lastLines}`,
        EXIT.failure,
      );
    }
    await sleep(50);
  }
}

/**
 * In a serve started by --detach: the pipe to the parent that takes the admin token line (then
 * closes), so that the token is shown once and never reaches the log file.
 */
function tokenPipe(): ((line: string | undefined) => void) | undefined {
  const fd = Number(process.env[TOKEN_FD_ENV]);
  delete process.env[TOKEN_FD_ENV];
  if (!Number.isInteger(fd) || fd < 3) return undefined;
  return (line) => {
    try {
      if (line !== undefined) writeSync(fd, `${line}\n`);
      closeSync(fd);
    } catch {
      // The parent gave up waiting: nobody is left to show the token to.
    }
  };
}

/** The command line again, minus --detach (the child must run in the foreground). */
function withoutDetach(argv: string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] as string;
    if (arg === '--detach') continue;
    if (arg === '--state') {
      i++; // given again, resolved, at the end
      continue;
    }
    if (arg.startsWith('--state=')) continue;
    out.push(arg);
  }
  return out;
}
