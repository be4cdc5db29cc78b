import { Command } from 'commander';
import { action } from '../action.ts';
import { checkAddress } from '../args.ts';
import type { Context } from '../context.ts';
import { amountWithRaw, clip, shortAddress, wideOption } from '../format.ts';
import type { Output } from '../output.ts';
import { showRead } from '../read.ts';

/** `agentctl positions [--wallet]`: the agent's own positions, or any wallet's. */
export interface PositionsOptions {
  wallet?: string | undefined;
  /** Vault names, raw amounts and addresses whole. */
  wide?: boolean | undefined;
}

interface PositionRow {
  vault_id?: string | undefined;
  vault_name?: string | undefined;
  vault_address?: string | undefined;
  shares?: string | undefined;
  value_usdc?: string | undefined;
}

export function positionsCommand(): Command {
  return new Command('positions')
    .summary('vault positions')
    .description(
      "Without --wallet: the agent's own positions (needs the API key). With --wallet: any wallet's onchain positions (public).",
    )
    .option('--wallet <address>', "a wallet to look up instead of the agent's own")
    .addOption(wideOption())
    .addHelpText(
      'after',
      '\nExamples:\n  agentctl positions\n  agentctl positions --wide\n  agentctl positions --wallet 0x000000000000000000000000000000000000dEaD',
    )
    .action(
      action((context, command) => {
        const { wallet, wide } = command.opts<PositionsOptions>();
        return run({ wallet, wide }, context);
      }),
    );
}

export async function run(options: PositionsOptions, context: Context): Promise<void> {
  const out = await context.output();
  if (options.wallet !== undefined) {
    const address = await checkAddress('--wallet', options.wallet);
    const client = await context.client();
    await showRead(out, client.walletPositions, [address], async (body) => {
      // The spec leaves this shape open: the same table when it has the same positions.
      const { Positions } = await import('../../api/schemas/index.ts');
      const known = Positions.safeParse(body);
      if (!known.success) return out.generic(body);
      positionsTable(out, known.data.positions, options.wide);
    });
    return;
  }
  const client = await context.authenticatedClient();
  await showRead(out, client.positions, [], (body) =>
    positionsTable(out, body.positions, options.wide),
  );
}

/**
 * One table for anyone's positions: `positions` and `positions --wallet` look alike. It fits
 * 80 columns (vault ids, decimal amounts, short addresses); --wide shows names, raw units and
 * addresses whole.
 */
function positionsTable(out: Output, positions: PositionRow[], wide = false): void {
  if (positions.length === 0) {
    out.print('no positions');
    return;
  }
  if (wide) {
    out.table(
      ['vault', 'name', 'shares', 'value', 'address'],
      positions.map((position) => [
        position.vault_id,
        position.vault_name,
        position.shares === undefined ? undefined : amountWithRaw(position.shares, 'shares'),
        position.value_usdc === undefined ? undefined : amountWithRaw(position.value_usdc),
        position.vault_address,
      ]),
    );
    return;
  }
  out.table(
    ['vault', 'shares', 'value', 'address'],
    positions.map((position) => [
      position.vault_id ?? clip(position.vault_name ?? '', 14),
      position.shares,
      position.value_usdc === undefined ? undefined : `${position.value_usdc} USDC`,
      position.vault_address === undefined ? undefined : shortAddress(position.vault_address),
    ]),
  );
}
