import { Command } from 'commander';
import { action } from '../../action.ts';
import { adminTokenOf, requireAdminToken } from '../../admin.ts';
import { checkSnapshotName } from '../../args.ts';
import type { Context } from '../../context.ts';
import { byteSize } from '../../format.ts';

export interface ExportOptions {
  adminToken: string | undefined;
  /** As typed: checked by run(). */
  name: string;
  file: string;
  /** Replace FILE if it exists. */
  force?: boolean | undefined;
}

/** Said in --help, by the command and in the README: the file is a secret. */
const SECRET_NOTE =
  "the file holds the sandbox's wallet.mnemonic (every funded account's key): keep it secret";

export function exportCommand(): Command {
  return new Command('export')
    .description(
      'write snapshot NAME to FILE, to start a sandbox from it with `agentctl serve --from FILE`',
    )
    .argument('<name>', 'a snapshot, as `agentctl sandbox snapshots` lists them')
    .argument('<file>', 'the file to write (mode 0600)')
    .option('--force', 'replace FILE if it exists')
    .addHelpText(
      'after',
      `\nFILE is a secret: it holds the sandbox's wallet.mnemonic, the key of every\naccount the sandbox funded. It is written with mode 0600, whole or not at all (a\ntemporary file beside it, then renamed), and an existing FILE is refused\nunless --force. API keys stay hashed in it: keys issued before the snapshot work\nagainst a sandbox started from it.\n\nExamples:\n  agentctl sandbox export base fixtures/base.sandbox\n  agentctl serve --from fixtures/base.sandbox --detach`,
    )
    .action(
      action((context, command) => {
        const [name, file] = command.processedArgs as [string, string];
        return run(
          {
            adminToken: adminTokenOf(command),
            name,
            file,
            force: command.opts<{ force?: boolean }>().force,
          },
          context,
        );
      }),
    );
}

/**
 * Downloads the exported snapshot into FILE (mode 0600, atomically). One line on stdout (with
 * --json a JSON object: name, file, size_bytes), and a notice on stderr that it is a secret.
 */
export async function run(options: ExportOptions, context: Context): Promise<void> {
  const name = await checkSnapshotName(options.name);
  const { checkSecretFileTarget, writeSecretFile } = await import('../../secret-file.ts');
  const target = { force: options.force === true, flag: '--force' };
  // Refused before any request: a file in the way, or no token.
  await checkSecretFileTarget(options.file, target);
  const token = requireAdminToken(options.adminToken);
  const client = await context.client();
  const out = await context.output();
  const written = await writeSecretFile(options.file, target, (open) =>
    client.snapshots.export(token, name, open),
  );
  if (out.json) out.jsonValue({ name, file: written.path, size_bytes: written.bytes });
  else out.print(`exported ${name} to ${options.file} (${byteSize(written.bytes)}, mode 0600)`);
  out.notice(SECRET_NOTE);
}
