import { Command } from 'commander';
import { action } from '../action.ts';
import { checkAddress } from '../args.ts';
import type { Context } from '../context.ts';
import { CliError, EXIT } from '../exit-codes.ts';
import { showRead } from '../read.ts';

/** `agentctl nfts [--wallet]`: the profile's registered wallet when none is given. */
export interface NftsOptions {
  wallet?: string | undefined;
}

export function nftsCommand(): Command {
  return new Command('nfts')
    .summary('NFT holdings of a wallet')
    .description("NFT holdings of --wallet, or of the profile's registered wallet.")
    .option('--wallet <address>', "the wallet (default: the profile's wallet_address)")
    .addHelpText(
      'after',
      '\nExample:\n  agentctl nfts --wallet 0x000000000000000000000000000000000000dEaD',
    )
    .action(
      action((context, command) => run({ wallet: command.opts<NftsOptions>().wallet }, context)),
    );
}

export async function run(options: NftsOptions, context: Context): Promise<void> {
  const wallet = options.wallet ?? (await context.profile()).wallet_address;
  if (!wallet) {
    throw new CliError(
      `no wallet: pass --wallet, or register (or \`agentctl config set wallet_address\`) for profile "${context.profileName}"`,
      EXIT.usage,
    );
  }
  const address = await checkAddress('wallet', wallet);
  const client = await context.client();
  const out = await context.output();
  // The spec leaves the shape open: every field is shown.
  await showRead(out, client.nfts, [address], (body) => out.generic(body));
}
