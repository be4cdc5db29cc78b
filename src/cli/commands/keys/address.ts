import { Command } from 'commander';
import { action } from '../../action.ts';
import type { Context } from '../../context.ts';

export interface KeysAddressOptions {
  name: string;
}

export function keysAddressCommand(): Command {
  return new Command('address')
    .description("print a keystore's address (no password needed)")
    .argument('<name>', 'the keystore name')
    .addHelpText('after', '\nExample:\n  agentctl keys address trader')
    .action(action((context, command) => run({ name: command.processedArgs[0] }, context)));
}

export async function run(options: KeysAddressOptions, context: Context): Promise<void> {
  const store = await context.keystores();
  const address = store.address(options.name);
  const out = await context.output();
  if (out.json)
    return out.jsonValue({ name: options.name, address, path: store.pathOf(options.name) });
  out.print(address);
}
