import { Command } from 'commander';
import { action } from '../../action.ts';
import type { Context } from '../../context.ts';
import { clip, wideOption } from '../../format.ts';

/** `agentctl keys list [--wide]`. */
export interface KeysListOptions {
  /** Long names whole, and each keystore's path. */
  wide?: boolean | undefined;
}

export function keysListCommand(): Command {
  return new Command('list')
    .description('list the keystores')
    .addOption(wideOption())
    .addHelpText('after', '\nExamples:\n  agentctl keys list\n  agentctl keys list --wide')
    .action(
      action((context, command) => run({ wide: command.opts<KeysListOptions>().wide }, context)),
    );
}

export async function run(options: KeysListOptions, context: Context): Promise<void> {
  const entries = (await context.keystores()).list();
  const out = await context.output();
  if (out.json) return out.jsonValue(entries);
  if (entries.length === 0) return out.print('no keys: create one with `agentctl keys new`');
  if (options.wide) {
    return out.table(
      ['name', 'address', 'path'],
      entries.map((entry) => [entry.name, entry.address, entry.path]),
    );
  }
  // The address whole (it is what one funds or registers); a name of up to 64 characters
  // clipped, and the path left to --wide, to fit 80 columns.
  out.table(
    ['name', 'address'],
    entries.map((entry) => [clip(entry.name, 28), entry.address]),
  );
}
