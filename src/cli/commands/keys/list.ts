import { Command } from 'commander';
import { action } from '../../action.ts';
import type { Context } from '../../context.ts';

/** `agentctl keys list` takes no options of its own. */
export type KeysListOptions = Record<string, never>;

export function keysListCommand(): Command {
  return new Command('list')
    .description('list the keystores')
    .addHelpText('after', '\nExample:\n  agentctl keys list --json')
    .action(action((context) => run({}, context)));
}

export async function run(_options: KeysListOptions, context: Context): Promise<void> {
  const entries = (await context.keystores()).list();
  const out = await context.output();
  if (out.json) return out.jsonValue(entries);
  if (entries.length === 0) return out.print('no keys: create one with `agentctl keys new`');
  out.table(
    ['name', 'address', 'path'],
    entries.map((entry) => [entry.name, entry.address, entry.path]),
  );
}
