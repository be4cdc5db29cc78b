import { join } from 'node:path';
import { Command } from 'commander';
import { SERVE_LOG_FILE as LOG_FILE } from '../../../sandbox/options.ts';
import { action } from '../../action.ts';
import type { Context } from '../../context.ts';
import { CliError, EXIT } from '../../exit-codes.ts';
import { sleep, stateDirOf, stateOf, stateOption } from '../../serve-dir.ts';

export interface StopOptions {
  /** --state as given; the default directory when undefined. */
  state: string | undefined;
}

/** How long `serve stop` waits for the exit. */
const STOP_TIMEOUT_MS = 30_000;

export function stopCommand(): Command {
  return stateOption(
    new Command('stop')
      .description(
        'Stop the sandbox running on a state directory (SIGTERM, as Ctrl-C would) and wait until it has exited. Not running is not an error.',
      )
      .addHelpText('after', '\nExample:\n  agentctl serve stop --state ~/.agentctl-sandbox'),
  ).action(action((context, command) => run({ state: stateOf(command) }, context)));
}

export async function run(options: StopOptions, context: Context): Promise<void> {
  const dir = stateDirOf(options.state);
  const { serveUsing } = await import('../../../sandbox/state-dir.ts');
  const { isRunning } = await import('../../../sandbox/process.ts');
  const out = await context.output();
  const running = serveUsing(dir);
  if (!running?.pid) {
    if (out.json) return out.jsonValue({ state: dir, running: false, stopped: false });
    return out.info(`no sandbox is running on ${dir}`);
  }
  process.kill(running.pid, 'SIGTERM');
  const deadline = Date.now() + STOP_TIMEOUT_MS;
  while (serveUsing(dir) && isRunning(running.pid)) {
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
}
