import { Command } from 'commander';
import { action } from '../../action.ts';
import type { Context } from '../../context.ts';
import { CliError, EXIT } from '../../exit-codes.ts';
import { confirmUnlessYes } from '../../prompts.ts';
import { canPrompt } from '../../tty.ts';

export interface KeysRemoveOptions {
  name: string;
  yes?: boolean;
}

export function keysRemoveCommand(): Command {
  return new Command('remove')
    .description('delete a keystore (asks first on a terminal; needs --yes otherwise)')
    .argument('<name>', 'the keystore name')
    .option('-y, --yes', 'do not ask')
    .addHelpText('after', '\nExample:\n  agentctl keys remove old-key --yes')
    .action(
      action((context, command) =>
        run(
          {
            name: command.processedArgs[0] as string,
            yes: command.opts<{ yes?: boolean }>().yes,
          },
          context,
        ),
      ),
    );
}

export async function run(options: KeysRemoveOptions, context: Context): Promise<void> {
  const { name, yes } = options;
  const store = await context.keystores();
  const address = store.address(name);
  if (!yes && !canPrompt()) {
    throw new CliError(`removing key ${name} cannot be undone: pass --yes`, EXIT.usage);
  }
  await confirmUnlessYes(`Delete key ${name} (${address})? This cannot be undone.`, yes);
  store.remove(name);
  const out = await context.output();
  if (out.json) return out.jsonValue({ name, address, removed: true });
  out.info(`removed key ${name}`);
}
