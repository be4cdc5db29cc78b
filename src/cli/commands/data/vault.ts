import { Command } from 'commander';
import { VAULT_IDS } from '../../../api/schemas/values.ts';
import { action } from '../../action.ts';
import type { Context } from '../../context.ts';
import { clip, rawWithAmount, shortAddress, wideOption } from '../../format.ts';
import { showRead } from '../../read.ts';
import { percent, timeText, usdc, vaultAddress, vaultIdOf } from './shared.ts';

export interface DataVaultOptions {
  /** An address or a vault id. */
  vault: string;
  wide?: boolean;
}

export function vaultCommand(): Command {
  return new Command('vault')
    .description("one vault's detail: share price, APYs over time, strategies")
    .argument('<vault>', `an address, or ${VAULT_IDS.join(' | ')}`)
    .addOption(wideOption())
    .addHelpText('after', '\nExample:\n  agentctl data vault configurable')
    .action(
      action((context, command) =>
        run({ ...command.opts(), vault: command.processedArgs[0] as string }, context),
      ),
    );
}

export async function run(options: DataVaultOptions, context: Context): Promise<void> {
  const address = await vaultAddress(context, options.vault);
  const client = await context.dataClient();
  const out = await context.output();
  await showRead(out, client.data.vault, [address], (vault) => {
    const id = vaultIdOf(vault.name);
    out.fields({
      name: id ? `${vault.name} (${id})` : vault.name,
      address: vault.address,
      asset: vault.asset,
      tvl: usdc(vault.tvl),
      'total shares': rawWithAmount(vault.totalShares, 'shares'),
      'price per share': usdc(vault.pricePerShare),
      'apy now': percent(vault.apy.current),
      'apy 7d': percent(vault.apy['7d']),
      'apy 30d': percent(vault.apy['30d']),
      'apy since inception': percent(vault.apy.inception),
      fees: `management ${vault.fees.management} %, performance ${vault.fees.performance} %, hurdle ${vault.fees.hurdle} %`,
      'ERC-7540': vault.isERC7540
        ? `yes, requests fulfilled after ${vault.fulfillmentDelay} s`
        : 'no',
      created: timeText(vault.createdAt, context.nowMs()),
    });
    if (vault.strategies.length > 0) {
      out.table(
        ['strategy', 'allocation', 'apy', 'id'],
        vault.strategies.map((s) => [
          options.wide ? s.name : clip(s.name, 32),
          percent(s.allocation * 100),
          percent(s.apy),
          options.wide ? s.id : shortAddress(s.id),
        ]),
      );
    }
  });
}
