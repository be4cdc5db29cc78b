import { Command } from 'commander';
import { action } from '../../action.ts';
import { adminTokenOf, requireAdminToken } from '../../admin.ts';
import type { Context } from '../../context.ts';
import { byteSize, clip, TABLE_WIDTH, timeWithHint, wideOption } from '../../format.ts';
import { showRead } from '../../read.ts';

export interface SnapshotsOptions {
  adminToken: string | undefined;
  /** Names whole, even past 80 columns. */
  wide?: boolean | undefined;
}

export function snapshotsCommand(): Command {
  return new Command('snapshots')
    .description("list the sandbox's snapshots, genesis first")
    .addOption(wideOption())
    .addHelpText(
      'after',
      '\nExamples:\n  agentctl sandbox snapshots\n  agentctl sandbox snapshots --json',
    )
    .action(
      action((context, command) =>
        run(
          {
            adminToken: adminTokenOf(command),
            wide: command.opts<{ wide?: boolean }>().wide,
          },
          context,
        ),
      ),
    );
}

/** What a table of `columns` columns adds to its cells' widths: padding and borders. */
const tableFrame = (columns: number) => columns * 3 + 1;
/** A name is never clipped shorter than this. */
const MIN_NAME_WIDTH = 12;

/**
 * One row per snapshot: name, block, when it was taken (ISO 8601 with a hint from the
 * sandbox's clock) and its size on disk. Long names are clipped to fit 80 columns.
 */
export async function run(options: SnapshotsOptions, context: Context): Promise<void> {
  const token = requireAdminToken(options.adminToken);
  const client = await context.client();
  const out = await context.output();
  await showRead(out, client.snapshots.list, [token], ({ snapshots }) => {
    const rows = snapshots.map((snapshot) => {
      const taken = Date.parse(snapshot.created_at);
      return [
        snapshot.name,
        String(snapshot.block_number),
        Number.isNaN(taken)
          ? snapshot.created_at
          : timeWithHint(Math.floor(taken / 1000), context.nowMs()),
        byteSize(snapshot.size_bytes),
      ];
    });
    const head = ['name', 'block', 'created', 'size'];
    const widest = (column: number) =>
      Math.max(head[column]?.length ?? 0, ...rows.map((row) => [...(row[column] ?? '')].length));
    const nameWidth = Math.max(
      MIN_NAME_WIDTH,
      TABLE_WIDTH - tableFrame(head.length) - widest(1) - widest(2) - widest(3),
    );
    out.table(
      head,
      rows.map(([name = '', ...rest]) => [options.wide ? name : clip(name, nameWidth), ...rest]),
    );
  });
}
