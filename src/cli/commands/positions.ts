import { Command } from 'commander';
import { action } from '../action.ts';
import { checkAddress } from './lookup.ts';

export function positionsCommand(): Command {
  return new Command('positions')
    .summary('vault positions')
    .description(
      "Without --wallet: the agent's own positions (needs the API key). With --wallet: any wallet's onchain positions (public).",
    )
    .option('--wallet <address>', "a wallet to look up instead of the agent's own")
    .addHelpText(
      'after',
      '\nExamples:\n  agentctl positions\n  agentctl positions --wallet 0x000000000000000000000000000000000000dEaD',
    )
    .action(
      action(async (context, command) => {
        const { wallet } = command.opts<{ wallet?: string }>();
        const out = await context.output();
        if (wallet) {
          const address = await checkAddress('--wallet', wallet);
          const response = await (await context.client()).walletPositions(address);
          if (out.json) return out.raw(response.text);
          return out.generic(response.data);
        }
        const response = await (await context.authenticatedClient()).positions();
        if (out.json) return out.raw(response.text);
        if (response.data.positions.length === 0) return out.print('no positions');
        out.table(
          ['vault', 'shares', 'value (USDC)', 'address'],
          response.data.positions.map((position) => [
            position.vault_id ?? position.vault_name,
            position.shares,
            position.value_usdc,
            position.vault_address,
          ]),
        );
      }),
    );
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
      action(async (context, command) => {
        const wallet =
          command.opts<{ wallet?: string }>().wallet ?? (await context.profile()).wallet_address;
        if (!wallet) {
          const { CliError, EXIT } = await import('../exit-codes.ts');
          throw new CliError(
            `no wallet: pass --wallet, or register (or \`agentctl config set wallet_address\`) for profile "${context.profileName}"`,
            EXIT.usage,
          );
        }
        const address = await checkAddress('wallet', wallet);
        const response = await (await context.client()).nfts(address);
        const out = await context.output();
        if (out.json) return out.raw(response.text);
        out.generic(response.data);
      }),
    );
}
