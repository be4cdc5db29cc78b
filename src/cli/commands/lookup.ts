import { Command } from 'commander';
import { action } from '../action.ts';
import { checkAddress } from '../args.ts';

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
