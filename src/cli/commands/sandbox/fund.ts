import { Command } from 'commander';
import { action } from '../../action.ts';
import { adminTokenOf, adminWrite } from '../../admin.ts';
import { checkAddress, exactJsonNumber } from '../../args.ts';
import type { Context } from '../../context.ts';
import { CliError, EXIT } from '../../exit-codes.ts';
import { rawWithAmount, weiWithEth } from '../../format.ts';

export interface FundOptions {
  adminToken: string | undefined;
  address: string;
  /** Decimal USDC, as typed. */
  usdc: string | undefined;
  /** Decimal ETH, as typed. */
  eth: string | undefined;
}

export function fundCommand(): Command {
  return new Command('fund')
    .description('mint test USDC and send ETH to an address')
    .argument('<address>', 'the address to fund')
    .option('--usdc <amount>', 'USDC to mint')
    .option('--eth <amount>', 'ETH to send')
    .addHelpText('after', '\nExample:\n  agentctl sandbox fund 0xAgentWallet --usdc 5000 --eth 1')
    .action(
      action((context, command) => {
        const { usdc, eth } = command.opts<{ usdc?: string; eth?: string }>();
        return run(
          {
            adminToken: adminTokenOf(command),
            address: command.processedArgs[0] as string,
            usdc,
            eth,
          },
          context,
        );
      }),
    );
}

/** Funds an address; prints its new balances with their units (and the raw values). */
export async function run(options: FundOptions, context: Context): Promise<void> {
  const address = await checkAddress('address', options.address);
  const { usdc, eth } = options;
  if (usdc === undefined && eth === undefined) {
    throw new CliError('give --usdc, --eth or both', EXIT.usage);
  }
  const body = {
    address,
    ...(usdc !== undefined ? { usdc: exactJsonNumber('--usdc', usdc) } : {}),
    ...(eth !== undefined ? { eth: exactJsonNumber('--eth', eth) } : {}),
  };
  const out = await context.output();
  await adminWrite(
    context,
    options.adminToken,
    '/sandbox/fund',
    body,
    (s) => s.FundResult,
    (result) =>
      out.fields({
        address: result.address,
        ...(result.usdc_tx !== null && { usdc_tx: result.usdc_tx }),
        ...(result.eth_tx !== null && { eth_tx: result.eth_tx }),
        usdc_balance: rawWithAmount(result.usdc_balance_raw, 'USDC'),
        eth_balance: weiWithEth(result.eth_balance_wei),
      }),
  );
}
