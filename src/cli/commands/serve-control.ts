import { spawn } from 'node:child_process';
import { closeSync, existsSync, mkdirSync, openSync, readFileSync, statSync } from 'node:fs';
import { homedir } from 'node:os';
import { join, resolve } from 'node:path';
import { Command } from 'commander';
import { SERVE_LOG_FILE as LOG_FILE } from '../../sandbox/options.ts';
import { action } from '../action.ts';
import { CliError, EXIT } from '../exit-codes.ts';

/**
 * `serve --detach` and `serve stop | status | logs`: a sandbox in the background that a
 * script can start, query and stop by its state directory, whatever started it (npx's child
 * is re-parented, so `kill $!` on `npx agentctl serve &` never reached it).
 */

/** How long `serve --detach` waits for the ready line, and `serve stop` for the exit. */
const READY_TIMEOUT_MS = 60_000;
const STOP_TIMEOUT_MS = 30_000;

/** The state directory `serve --detach` and its subcommands use when --state is not given. */
export function defaultStateDir(env: NodeJS.ProcessEnv = process.env): string {
  const base = env.XDG_STATE_HOME || join(homedir(), '.local', 'state');
  return join(base, 'agentctl', 'sandbox');
}

const sleep = (ms: number) => new Promise((done) => setTimeout(done, ms));

function readFrom(path: string, offset: number): string {
  try {
    return readFileSync(path).subarray(offset).toString('utf8');
  } catch {
    return '';
  }
}

/**
 * Starts `serve` again as a detached process with its output in STATE/serve.log, waits for
 * its ready line, prints what it printed, and returns: the sandbox keeps running.
 */
export async function detach(argv: string[], state: string | undefined): Promise<void> {
  const dir = resolve(state ?? defaultStateDir());
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const logPath = join(dir, LOG_FILE);
  const { serveUsing } = await import('../../sandbox/state-dir.ts');
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
  const child = spawn(process.execPath, args, {
    detached: true,
    stdio: ['ignore', log, log],
    env: process.env,
  });
  closeSync(log);
  let exited: number | null | undefined;
  child.on('exit', (code, signal) => {
    exited = code ?? (signal ? 128 : 1);
  });
  child.unref();
  const deadline = Date.now() + READY_TIMEOUT_MS;
  for (;;) {
    const output = readFrom(logPath, offset);
    const ready = /agentctl sandbox listening on (\S+)/.exec(output);
    if (ready) {
      // The lines serve prints to stdout (admin token, state, chain, URL), not its JSON log.
      for (const line of output.split('\n')) {
        if (line && !line.startsWith('{')) process.stdout.write(`${line}\n`);
      }
      process.stdout.write(
        `running in the background as pid ${child.pid}; logs: ${logPath}\nstop it with: agentctl serve stop --state ${dir}\n`,
      );
      return;
    }
    if (exited !== undefined || Date.now() > deadline) {
      const lastLines = output.trim().split('\n').slice(-5).join('\n');
      if (exited === undefined) child.kill('SIGTERM');
      throw new CliError(
        `${exited === undefined ? 'serve was not ready in time' : 'serve did not start'}; the end of ${logPath}:\n${lastLines}`,
        EXIT.failure,
      );
    }
    await sleep(50);
  }
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

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

function stateOption(command: Command): Command {
  return command.option(
    '--state <dir>',
    `the sandbox's state directory (default: ${defaultStateDir().replace(homedir(), '~')})`,
  );
}

/**
 * The state directory a subcommand names (--state before or after its name: `serve` has
 * its own --state), and the serve using it, if any.
 */
async function sandboxOn(command: Command) {
  const dir = resolve(command.optsWithGlobals<{ state?: string }>().state ?? defaultStateDir());
  const { serveUsing } = await import('../../sandbox/state-dir.ts');
  return { dir, serveUsing: () => serveUsing(dir) };
}

export function serveSubcommands(): Command[] {
  const stop = stateOption(
    new Command('stop')
      .description(
        'Stop the sandbox running on a state directory (SIGTERM, as Ctrl-C would) and wait until it has exited. Not running is not an error.',
      )
      .addHelpText('after', '\nExample:\n  agentctl serve stop --state ~/.agentctl-sandbox'),
  ).action(
    action(async (context, command) => {
      const { dir, serveUsing } = await sandboxOn(command);
      const out = await context.output();
      const running = serveUsing();
      if (!running?.pid) {
        if (out.json) return out.jsonValue({ state: dir, running: false, stopped: false });
        return out.info(`no sandbox is running on ${dir}`);
      }
      process.kill(running.pid, 'SIGTERM');
      const deadline = Date.now() + STOP_TIMEOUT_MS;
      while (serveUsing() && isAlive(running.pid)) {
        if (Date.now() > deadline) {
          throw new CliError(
            `pid ${running.pid} has not exited ${STOP_TIMEOUT_MS / 1000} s after SIGTERM; see ${join(dir, LOG_FILE)}, or kill -9 ${running.pid}`,
            EXIT.failure,
          );
        }
        await sleep(50);
      }
      if (out.json)
        return out.jsonValue({ state: dir, running: false, stopped: true, pid: running.pid });
      out.info(`stopped the sandbox on ${dir} (pid ${running.pid})`);
    }),
  );

  const status = stateOption(
    new Command('status')
      .description(
        'Say whether a sandbox is running on a state directory, where it listens, and whether it is healthy. Exits 1 when none is running, or when it is not healthy.',
      )
      .addHelpText('after', '\nExample:\n  agentctl serve status --json'),
  ).action(
    action(async (context, command) => {
      const { dir, serveUsing } = await sandboxOn(command);
      const out = await context.output();
      const running = serveUsing();
      let health: string | undefined;
      if (running?.url) {
        try {
          const answer = await fetch(`${running.url}/health`, {
            signal: AbortSignal.timeout(3_000),
          });
          health = ((await answer.json()) as { status?: string }).status ?? 'unknown';
        } catch {
          health = 'unreachable';
        }
      }
      const result = {
        state: dir,
        running: Boolean(running),
        pid: running?.pid ?? null,
        url: running?.url ?? null,
        rpc_url: running?.rpc_url ?? null,
        health: health ?? null,
        log: existsSync(join(dir, LOG_FILE)) ? join(dir, LOG_FILE) : null,
      };
      if (out.json) out.jsonValue(result);
      else if (!running) out.print(`not running (state ${dir})`);
      else out.fields({ ...result, running: 'yes' });
      if (!running) throw new CliError(`no sandbox is running on ${dir}`, EXIT.failure);
      if (health !== 'ok')
        throw new CliError(`the sandbox on ${dir} is ${health ?? 'starting'}`, EXIT.failure);
    }),
  );

  const logs = stateOption(
    new Command('logs')
      .description(
        'Print the log of a sandbox started with --detach (its ready lines and JSON request log).',
      )
      .option('-n, --lines <n>', 'only the last N lines', (value) => {
        if (!/^\d+$/.test(value))
          throw new CliError(`--lines ${value}: must be a whole number`, EXIT.usage);
        return Number(value);
      })
      .option('-f, --follow', 'keep printing new lines until Ctrl-C')
      .addHelpText(
        'after',
        '\nExamples:\n  agentctl serve logs -n 50\n  agentctl serve logs --follow',
      ),
  ).action(
    action(async (_context, command) => {
      const { dir } = await sandboxOn(command);
      const path = join(dir, LOG_FILE);
      const { lines, follow } = command.opts<{ lines?: number; follow?: boolean }>();
      if (!existsSync(path)) {
        throw new CliError(
          `no log at ${path}: only a sandbox started with \`agentctl serve --detach\` writes one`,
          EXIT.usage,
        );
      }
      let text = readFrom(path, 0);
      let offset = Buffer.byteLength(text);
      if (lines !== undefined) {
        const all = text.endsWith('\n') ? text.slice(0, -1).split('\n') : text.split('\n');
        text = lines === 0 ? '' : `${all.slice(-lines).join('\n')}\n`;
      }
      process.stdout.write(text);
      while (follow) {
        await sleep(200);
        const more = readFrom(path, offset);
        offset += Buffer.byteLength(more);
        process.stdout.write(more);
      }
    }),
  );
  return [stop, status, logs];
}
