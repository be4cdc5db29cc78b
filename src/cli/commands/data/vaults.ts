import { Command, Option } from 'commander';
import { action } from '../../action.ts';
import { usdcToRaw } from '../../args.ts';
import type { Context } from '../../context.ts';
import { clip, wideOption } from '../../format.ts';
import { showRead } from '../../read.ts';
import { percent, usdc, usdcShort, vaultIdOf } from './shared.ts';

const RISK_LEVELS = ['conservative', 'moderate', 'aggressive'];

export interface DataVaultsOptions {
  risk?: string;
  /** USDC, as typed. */
  minTvl?: string;
  sort?: 'tvl' | 'apy';
  wide?: boolean;
}

export function vaultsCommand(): Command {
  return new Command('vaults')
    .description('every vault with its TVL, APY and risk level')
    .addOption(new Option('--risk <level>', 'only this risk level').choices(RISK_LEVELS))
    .option('--min-tvl <usdc>', 'only vaults holding at least this many USDC')
    .addOption(new Option('--sort <field>', 'highest first').choices(['tvl', 'apy']))
    .addOption(wideOption())
    .addHelpText('after', '\nExample:\n  agentctl data vaults --risk moderate --sort tvl')
    .action(action((context, command) => run(command.opts<DataVaultsOptions>(), context)));
}

export async function run(options: DataVaultsOptions, context: Context): Promise<void> {
  const query = {
    riskLevel: options.risk,
    minTvl: options.minTvl === undefined ? undefined : usdcToRaw('--min-tvl', options.minTvl),
    orderBy: options.sort && `${options.sort}_desc`,
  };
  const client = await context.dataClient();
  const out = await context.output();
  await showRead(out, client.data.vaults, [query], (body) => {
    const filtered = options.risk !== undefined || options.minTvl !== undefined;
    if (body.vaults.length === 0) return out.print(filtered ? 'no vaults match' : 'no vaults');
    if (options.wide) {
      out.table(
        ['vault', 'name', 'tvl', 'apy', 'risk', 'strategies', 'ERC-7540', 'address'],
        body.vaults.map((vault) => [
          vaultIdOf(vault.name) ?? '',
          vault.name,
          usdc(vault.tvl),
          percent(vault.apy),
          vault.riskLevel,
          vault.strategies,
          asyncText(vault.isERC7540, vault.fulfillmentDelay),
          vault.address,
        ]),
      );
    } else {
      out.table(
        ['vault', 'tvl', 'apy', 'risk', 'ERC-7540'],
        body.vaults.map((vault) => [
          vaultIdOf(vault.name) ?? clip(vault.name, 12),
          usdcShort(vault.tvl),
          percent(vault.apy),
          vault.riskLevel,
          asyncText(vault.isERC7540, vault.fulfillmentDelay),
        ]),
      );
    }
    // The service's totalTvl counts every vault, filtered or not: the total printed is that of
    // the vaults shown.
    const shown = body.vaults.reduce((sum, vault) => sum + BigInt(vault.tvl), 0n).toString();
    const count = body.vaults.length;
    out.print(`total tvl ${usdc(shown)} in the ${count === 1 ? 'vault' : `${count} vaults`} shown`);
    if (filtered) out.print(`all vaults ${usdc(body.totalTvl)}`);
  });
}

function asyncText(isERC7540: boolean, delay: number | null): string {
  return isERC7540 ? `yes, ${delay ?? '?'} s` : 'no';
}
