import { Command } from 'commander';
import { action } from '../../action.ts';
import { adminTokenOf, requireAdminToken } from '../../admin.ts';
import { checkSnapshotName } from '../../args.ts';
import type { Context } from '../../context.ts';

export interface SnapshotDeleteOptions {
  adminToken: string | undefined;
  /** As typed: checked by run(). */
  name: string;
}

export function snapshotDeleteCommand(): Command {
  return new Command('snapshot-delete')
    .description('delete snapshot NAME (genesis cannot be deleted)')
    .argument('<name>', 'a snapshot, as `agentctl sandbox snapshots` lists them')
    .addHelpText('after', '\nExample:\n  agentctl sandbox snapshot-delete base')
    .action(
      action((context, command) =>
        run(
          { adminToken: adminTokenOf(command), name: command.processedArgs[0] as string },
          context,
        ),
      ),
    );
}

/** Deletes; one line saying which. */
export async function run(options: SnapshotDeleteOptions, context: Context): Promise<void> {
  const name = await checkSnapshotName(options.name);
  const token = requireAdminToken(options.adminToken);
  const client = await context.client();
  const out = await context.output();
  const response = await client.snapshots.delete(token, name);
  out.writeResult(response, (deleted) => out.print(`deleted snapshot ${deleted.name}`));
}
