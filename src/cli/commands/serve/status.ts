import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { Command } from 'commander';
import { SERVE_LOG_FILE as LOG_FILE } from '../../../sandbox/options.ts';
import { action } from '../../action.ts';
import type { Context } from '../../context.ts';
import { CliError, EXIT } from '../../exit-codes.ts';
import { stateDirOf, stateOf, stateOption } from '../../serve-dir.ts';

export interface StatusOptions {
  /** --state as given; the default directory when undefined. */
  state: string | undefined;
}

export function statusCommand(): Command {
  return stateOption(
    new Command('status')
      .description(
        'Say whether a sandbox is running on a state directory, where it listens, and whether it is healthy. Exits 1 when none is running, or when it is not healthy.',
      )
      .addHelpText('after', '\nExample:\n  agentctl serve status --json'),
  ).action(action((context, command) => run({ state: stateOf(command) }, context)));
}

export async function run(options: StatusOptions, context: Context): Promise<void> {
  const dir = stateDirOf(options.state);
  const { serveUsing } = await import('../../../sandbox/state-dir.ts');
  const out = await context.output();
  const running = serveUsing(dir);
  let health: string | undefined;
  if (running?.url) {
    try {
      const answer = await fetch(`${running.url}/health`, { signal: AbortSignal.timeout(3_000) });
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
  if (health !== 'ok') {
    throw new CliError(`the sandbox on ${dir} is ${health ?? 'starting'}`, EXIT.failure);
  }
}
