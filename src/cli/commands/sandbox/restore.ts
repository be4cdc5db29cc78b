import { Command } from 'commander';
import { action } from '../../action.ts';
import { adminTokenOf, requireAdminToken } from '../../admin.ts';
import { checkSnapshotName } from '../../args.ts';
import type { Context } from '../../context.ts';

export interface RestoreOptions {
  adminToken: string | undefined;
  /** As typed: checked by run(). */
  name: string;
}

export function restoreCommand(): Command {
  return new Command('restore')
    .description(
      'put the whole sandbox back as it was at snapshot NAME (genesis: a new, empty one)',
    )
    .argument('<name>', 'a snapshot, as `agentctl sandbox snapshots` lists them')
    .addHelpText(
      'after',
      '\nEverything goes back: the chain, agents and their API keys (a key issued since\nis refused), the index, the clock. Writes get 503 while it runs; GraphQL\nsubscriptions are closed (`agentctl watch` subscribes again by itself).\n\nExamples:\n  agentctl sandbox restore base\n  agentctl sandbox restore genesis',
    )
    .action(
      action((context, command) =>
        run(
          { adminToken: adminTokenOf(command), name: command.processedArgs[0] as string },
          context,
        ),
      ),
    );
}

/** Restores; one line: the snapshot, its block and how long the sandbox took. */
export async function run(options: RestoreOptions, context: Context): Promise<void> {
  const name = await checkSnapshotName(options.name);
  const token = requireAdminToken(options.adminToken);
  const client = await context.client();
  const out = await context.output();
  const response = await client.snapshots.restore(token, name);
  out.writeResult(response, (restored) =>
    out.print(
      `restored ${restored.name}: block ${restored.block_number} (in ${Math.round(restored.restored_in_ms)} ms)`,
    ),
  );
}
