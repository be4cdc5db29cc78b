import { Command } from 'commander';
import { action } from '../action.ts';
import { checkAddress } from '../args.ts';
import { amountWithRaw } from '../format.ts';
import type { Output } from '../output.ts';

interface PositionRow {
  vault_id?: string | undefined;
  vault_name?: string | undefined;
  vault_address?: string | undefined;
  shares?: string | undefined;
  value_usdc?: string | undefined;
}

/** One table for anyone's positions: `positions` and `positions --wallet` look alike. */
function positionsTable(out: Output, positions: PositionRow[]): void {
  if (positions.length === 0) {
    out.print('no positions');
    return;
  }
  out.table(
    ['vault', 'shares', 'value', 'address'],
    positions.map((position) => [
      position.vault_id ?? position.vault_name,
      position.shares === undefined ? undefined : amountWithRaw(position.shares, ''),
      position.value_usdc === undefined ? undefined : amountWithRaw(position.value_usdc),
      position.vault_address,
    ]),
  );
}

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
          // The spec leaves this shape open: the same table when it has the same positions.
          const { Positions } = await import('../../api/schemas/index.ts');
          const known = Positions.safeParse(response.data);
          if (!known.success) return out.generic(response.data);
          return positionsTable(out, known.data.positions);
        }
        const client = await context.authenticatedClient();
        if (out.json) return out.raw((await client.positions.asReceived()).text);
        const response = await client.positions();
        positionsTable(out, response.data.positions);
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
