import { Command } from 'commander';
import { action } from '../action.ts';

export function vaultsCommand(): Command {
  return new Command('vaults')
    .summary('the active vaults')
    .description('List the active vaults, with the identifier `deposit` takes.')
    .addHelpText('after', '\nExample:\n  agentctl vaults')
    .action(
      action(async (context) => {
        const response = await (await context.client()).vaults();
        const out = await context.output();
        if (out.json) return out.raw(response.text);
        out.table(
          ['vault', 'name', 'apy %', 'total assets', 'status', 'address'],
          response.data.vaults.map((vault) => [
            vault.vault_id ?? '',
            vault.name,
            vault.apy,
            vault.total_assets,
            vault.status,
            vault.address,
          ]),
        );
      }),
    );
}
