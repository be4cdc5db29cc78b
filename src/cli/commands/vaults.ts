import { Command } from 'commander';
import { VAULT_IDS } from '../../api/schemas/values.ts';
import { action } from '../action.ts';
import { amountWithRaw } from '../format.ts';

/** The deposit identifier, for a service that does not send `vault_id`: from the name. */
function identifierOf(name: string): string {
  return VAULT_IDS.find((id) => name.toLowerCase().includes(id)) ?? '';
}

export function vaultsCommand(): Command {
  return new Command('vaults')
    .summary('the active vaults')
    .description('List the active vaults, with the identifier `deposit` takes.')
    .addHelpText('after', '\nExample:\n  agentctl vaults')
    .action(
      action(async (context) => {
        const client = await context.client();
        const out = await context.output();
        if (out.json) return out.raw((await client.vaults.asReceived()).text);
        const response = await client.vaults();
        out.table(
          ['vault', 'name', 'apy %', 'total assets', 'status', 'address'],
          response.data.vaults.map((vault) => [
            vault.vault_id ?? identifierOf(vault.name),
            vault.name,
            vault.apy,
            amountWithRaw(vault.total_assets),
            vault.status,
            vault.address,
          ]),
        );
      }),
    );
}
