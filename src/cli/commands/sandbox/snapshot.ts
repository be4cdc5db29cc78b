import { Command } from 'commander';
import { action } from '../../action.ts';
import { adminTokenOf, requireAdminToken } from '../../admin.ts';
import { checkSnapshotName } from '../../args.ts';
import type { Context } from '../../context.ts';
import { byteSize } from '../../format.ts';

export interface SnapshotOptions {
  adminToken: string | undefined;
  /** As typed: checked by run(). */
  name: string;
  /** Take it again when a snapshot of that name exists (else 409, exit 2). */
  replace?: boolean | undefined;
}

export function snapshotCommand(): Command {
  return new Command('snapshot')
    .description(
      'take a snapshot of the whole sandbox (chain, agents and keys, index, clock) under NAME',
    )
    .argument('<name>', '1 to 64 of A-Z a-z 0-9 . _ -')
    .option('--replace', 'take it again if a snapshot of that name exists (never genesis)')
    .addHelpText(
      'after',
      '\nA name in use is refused (exit 2) unless --replace. Back to it with\n`agentctl sandbox restore NAME`; list them with `agentctl sandbox snapshots`.\n\nExamples:\n  agentctl sandbox snapshot base\n  agentctl sandbox snapshot base --replace --json',
    )
    .action(
      action((context, command) =>
        run(
          {
            adminToken: adminTokenOf(command),
            name: command.processedArgs[0] as string,
            replace: command.opts<{ replace?: boolean }>().replace,
          },
          context,
        ),
      ),
    );
}

/** Takes the snapshot; one line: its name, block and size. */
export async function run(options: SnapshotOptions, context: Context): Promise<void> {
  const name = await checkSnapshotName(options.name);
  const token = requireAdminToken(options.adminToken);
  const client = await context.client();
  const out = await context.output();
  const response = await client.snapshots.take(token, {
    name,
    ...(options.replace && { replace: true }),
  });
  out.writeResult(response, (snapshot) =>
    out.print(
      `snapshot ${snapshot.name} taken at block ${snapshot.block_number} (${byteSize(snapshot.size_bytes)})`,
    ),
  );
}
