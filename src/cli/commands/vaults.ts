import { Command } from 'commander';
import { VAULT_IDS } from '../../api/schemas/values.ts';
import { action } from '../action.ts';
import type { Context } from '../context.ts';
import { amountWithRaw } from '../format.ts';
import { showRead } from '../read.ts';

/** `agentctl vaults` takes no options of its own. */
export type VaultsOptions = Record<string, never>;

export function vaultsCommand(): Command {
  return new Command('vaults')
    .summary('the active vaults')
    .description('List the active vaults, with the identifier `deposit` takes.')
    .addHelpText('after', '\nExample:\n  agentctl vaults')
    .action(action((context) => run({}, context)));
}

/** The deposit identifier, for a service that does not send `vault_id`: from the name. */
function identifierOf(name: string): string {
  return VAULT_IDS.find((id) => name.toLowerCase().includes(id)) ?? '';
}

export async function run(_options: VaultsOptions, context: Context): Promise<void> {
  const client = await context.client();
  const out = await context.output();
  await showRead(out, client.vaults, [], (body) =>
    out.table(
      ['vault', 'name', 'apy %', 'total assets', 'status', 'address'],
      body.vaults.map((vault) => [
        vault.vault_id ?? identifierOf(vault.name),
        vault.name,
        vault.apy,
        amountWithRaw(vault.total_assets),
        vault.status,
        vault.address,
      ]),
    ),
  );
}
