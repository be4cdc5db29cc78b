import { Command } from 'commander';
import { action } from '../../action.ts';
import { adminRead, adminTokenOf } from '../../admin.ts';
import type { Context } from '../../context.ts';
import { nestedFieldLines, timeWithHint } from '../../format.ts';
import { showRead } from '../../read.ts';

export interface InfoOptions {
  adminToken: string | undefined;
}

export function infoCommand(): Command {
  return new Command('info')
    .description('chain, contract addresses, clock and state of the sandbox')
    .addHelpText('after', '\nExample:\n  agentctl sandbox info --json')
    .action(action((context, command) => run({ adminToken: adminTokenOf(command) }, context)));
}

/** The sandbox's info, nested objects (contracts, clock, index…) as indented fields. */
export async function run(options: InfoOptions, context: Context): Promise<void> {
  const out = await context.output();
  const read = await adminRead(context, options.adminToken, '/sandbox/info', (s) => s.SandboxInfo);
  await showRead(out, read, [], (info) => {
    const shown = {
      ...info,
      clock: { ...info.clock, now: timeWithHint(info.clock.now, context.nowMs()) },
    };
    for (const line of nestedFieldLines(shown, out.colour.bold)) out.print(line);
  });
}
