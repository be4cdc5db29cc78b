import { Command } from 'commander';
import { action } from '../../action.ts';
import { adminTokenOf, adminWrite } from '../../admin.ts';
import type { Context } from '../../context.ts';
import { CliError, EXIT } from '../../exit-codes.ts';
import { timeWithHint } from '../../format.ts';

export interface AdvanceOptions {
  adminToken: string | undefined;
  /** As typed: checked by run(). */
  seconds: string;
}

export function advanceCommand(): Command {
  return new Command('advance')
    .description('move the sandbox clock (and chain time) forward')
    .argument('<seconds>', 'an integer, for example 86400 for a day')
    .addHelpText('after', '\nExample:\n  agentctl sandbox advance 86400')
    .action(
      action((context, command) =>
        run(
          { adminToken: adminTokenOf(command), seconds: command.processedArgs[0] as string },
          context,
        ),
      ),
    );
}

/** Moves the clock on; prints the sandbox's new now (ISO 8601) and how far it is ahead. */
export async function run(options: AdvanceOptions, context: Context): Promise<void> {
  const { seconds } = options;
  if (/^-?\d+$/.test(seconds.trim()) && Number(seconds) <= 0) {
    throw new CliError(
      `seconds ${seconds}: the sandbox clock only moves forward; give a whole number of seconds, at least 1 (86400 is a day)`,
      EXIT.usage,
    );
  }
  if (!/^\d+$/.test(seconds)) {
    throw new CliError(
      `seconds ${JSON.stringify(seconds)}: must be a whole number of seconds, at least 1 (86400 is a day)`,
      EXIT.usage,
    );
  }
  const out = await context.output();
  await adminWrite(
    context,
    options.adminToken,
    '/sandbox/clock/advance',
    { seconds: Number(seconds) },
    (s) => s.ClockState,
    (clock) =>
      out.fields({
        now: timeWithHint(clock.now, context.nowMs()),
        offset_seconds: `${clock.offset_seconds} (ahead of the wall clock)`,
      }),
  );
}
