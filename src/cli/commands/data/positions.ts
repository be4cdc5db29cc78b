import { Command } from 'commander';
import { action } from '../../action.ts';
import type { Context } from '../../context.ts';
import { clip, rawToDecimal, rawWithAmount, wideOption } from '../../format.ts';
import { showRead } from '../../read.ts';
import {
  percent,
  signedUsdc,
  timeCell,
  timeText,
  usdc,
  usdcShort,
  userAddress,
  vaultIdOf,
} from './shared.ts';

export interface DataPositionsOptions {
  /** The wallet; default the profile's agent wallet. */
  address?: string;
  wide?: boolean;
}

export function positionsCommand(): Command {
  return new Command('positions')
    .description("a wallet's vault positions, with value, pnl and ERC-7540 requests")
    .argument('[address]', "the wallet (default: the profile's agent wallet)")
    .addOption(wideOption())
    .addHelpText(
      'after',
      '\nExample:\n  agentctl data positions 0x000000000000000000000000000000000000dEaD',
    )
    .action(
      action((context, command) =>
        run(
          { ...command.opts(), address: command.processedArgs[0] as string | undefined },
          context,
        ),
      ),
    );
}

export async function run(options: DataPositionsOptions, context: Context): Promise<void> {
  const address = await userAddress(context, options.address);
  const client = await context.dataClient();
  const out = await context.output();
  await showRead(out, client.data.positions, [address], (body) => {
    if (body.positions.length === 0) return out.print(`no positions for ${body.address}`);
    const now = context.nowMs();
    if (options.wide) {
      return out.table(
        ['vault', 'shares', 'value', 'pnl', 'pnl %', 'pending', 'claimable', 'since', 'address'],
        body.positions.map((p) => [
          p.vaultName,
          rawWithAmount(p.shares, 'shares'),
          usdc(p.value),
          signedUsdc(p.pnl, true),
          percent(p.pnlPercent),
          requestsText(p.pendingDeposit, p.pendingRedeem, true),
          requestsText(p.claimableDeposit, p.claimableRedeem, true),
          timeText(p.depositedAt, now),
          p.vault,
        ]),
      );
    }
    // Value with the shares under it, pnl with its percentage: four columns fit 80.
    out.table(
      ['vault', 'value\nshares', 'pnl', 'since'],
      body.positions.map((p) => [
        vaultIdOf(p.vaultName) ?? clip(p.vaultName, 12),
        `${usdcShort(p.value)}\n${rawToDecimal(p.shares)} shares`,
        `${signedUsdc(p.pnl, false)}\n${percent(p.pnlPercent)}`,
        timeCell(p.depositedAt, now),
      ]),
    );
    // ERC-7540 requests as lines under the table.
    for (const p of body.positions) {
      const vault = vaultIdOf(p.vaultName) ?? p.vaultName;
      const pending = requestsText(p.pendingDeposit, p.pendingRedeem, false);
      const claimable = requestsText(p.claimableDeposit, p.claimableRedeem, false);
      if (pending) out.print(`${vault}: pending ${pending}`);
      if (claimable) out.print(`${vault}: claimable ${claimable}`);
    }
  });
}

/** ERC-7540 amounts: deposits in USDC, redemptions in shares; blank when none. */
function requestsText(deposit: string, redeem: string, wide: boolean): string {
  const parts: string[] = [];
  if (deposit !== '0') parts.push(`deposit ${wide ? usdc(deposit) : usdcShort(deposit)}`);
  if (redeem !== '0') {
    parts.push(
      `redeem ${wide ? rawWithAmount(redeem, 'shares') : `${rawToDecimal(redeem)} shares`}`,
    );
  }
  return parts.join(', ');
}
