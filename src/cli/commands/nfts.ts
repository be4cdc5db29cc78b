import { Command } from 'commander';
import { action } from '../action.ts';
import { checkAddress } from '../args.ts';
import type { Context } from '../context.ts';
import { CliError, EXIT } from '../exit-codes.ts';
import { clip, shortAddress, wideOption } from '../format.ts';
import { showRead } from '../read.ts';

/** `agentctl nfts [--wallet]`: the profile's registered wallet when none is given. */
export interface NftsOptions {
  wallet?: string | undefined;
  /** Names, token ids and contract addresses whole. */
  wide?: boolean | undefined;
}

export function nftsCommand(): Command {
  return new Command('nfts')
    .summary('NFT holdings of a wallet')
    .description("NFT holdings of --wallet, or of the profile's registered wallet.")
    .option('--wallet <address>', "the wallet (default: the profile's wallet_address)")
    .addOption(wideOption())
    .addHelpText(
      'after',
      '\nExample:\n  agentctl nfts --wallet 0x000000000000000000000000000000000000dEaD',
    )
    .action(
      action((context, command) => {
        const { wallet, wide } = command.opts<NftsOptions>();
        return run({ wallet, wide }, context);
      }),
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
  await showRead(out, client.nfts, [address], async (body) => {
    // The spec leaves the shape open: the sandbox's as a table, any other field by field.
    const { NftHoldings } = await import('../../api/schemas/index.ts');
    const known = NftHoldings.safeParse(body);
    if (!known.success) return out.generic(body);
    const { wallet_address, nfts, total } = known.data;
    out.fields({ wallet: wallet_address, total });
    if (nfts.length === 0) return;
    if (options.wide) {
      return out.table(
        ['collection', 'symbol', 'token id', 'contract'],
        nfts.map((nft) => [nft.collection_name, nft.symbol, nft.token_id, nft.contract_address]),
      );
    }
    // 80 columns: a token id may have 78 digits, a name any length; --wide shows them whole.
    out.table(
      ['collection', 'symbol', 'token id', 'contract'],
      nfts.map((nft) => [
        clip(nft.collection_name, 24),
        clip(nft.symbol, 10),
        clip(nft.token_id, 16),
        shortAddress(nft.contract_address),
      ]),
    );
  });
}
