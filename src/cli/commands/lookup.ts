import { Command } from 'commander';
import { action } from '../action.ts';
import { CliError, EXIT } from '../exit-codes.ts';

/**
 * Checks an address with the shared schema before any request (exit 2 when it is wrong).
 * Loaded lazily: the schema pulls in viem, which --help must not load.
 */
export async function checkAddress(name: string, value: string): Promise<string> {
  const { Address } = await import('../../api/schemas/index.ts');
  const parsed = Address.safeParse(value);
  if (!parsed.success) {
    throw new CliError(`${name} ${value}: ${parsed.error.issues[0]?.message}`, EXIT.usage);
  }
  return parsed.data;
}

export function lookupCommand(): Command {
  return new Command('lookup')
    .summary('registration lookup of a wallet')
    .description('Show whether a wallet is registered as an agent, and its public record.')
    .argument('<wallet>', 'the wallet address (0x…)')
    .addHelpText(
      'after',
      '\nExample:\n  agentctl lookup 0x000000000000000000000000000000000000dEaD',
    )
    .action(
      action(async (context, command) => {
        const wallet = await checkAddress('wallet', command.processedArgs[0] as string);
        const client = await context.client();
        const out = await context.output();
        if (out.json) return out.raw((await client.lookup.asReceived(wallet)).text);
        const response = await client.lookup(wallet);
        if (!response.data.registered) return out.print(`${wallet} is not registered`);
        out.fields(response.data);
      }),
    );
}
