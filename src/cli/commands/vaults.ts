import { Command } from 'commander';
import { VAULT_IDS } from '../../api/schemas/values.ts';
import { action } from '../action.ts';
import type { Context } from '../context.ts';
import { amountWithRaw, shortAddress, wideOption } from '../format.ts';
import { showRead } from '../read.ts';

/** `agentctl vaults [--wide]`. */
export interface VaultsOptions {
  /** Every column, and values whole: the name, raw amounts, full addresses. */
  wide?: boolean | undefined;
}

export function vaultsCommand(): Command {
  return new Command('vaults')
    .summary('the active vaults')
    .description(
      'List the active vaults, with the identifier `deposit` takes. The table fits 80 columns (addresses shortened); --wide adds the names, the raw amounts and the full addresses.',
    )
    .addOption(wideOption())
    .addHelpText('after', '\nExamples:\n  agentctl vaults\n  agentctl vaults --wide')
    .action(
      action((context, command) => run({ wide: command.opts<VaultsOptions>().wide }, context)),
    );
}

/** The deposit identifier, for a service that does not send `vault_id`: from the name. */
function identifierOf(name: string): string {
  return VAULT_IDS.find((id) => name.toLowerCase().includes(id)) ?? '';
}

export async function run(options: VaultsOptions, context: Context): Promise<void> {
  const client = await context.client();
  const out = await context.output();
  await showRead(out, client.vaults, [], ({ vaults }) => {
    if (options.wide) {
      return out.table(
        ['vault', 'name', 'apy %', 'total assets', 'status', 'address'],
        vaults.map((vault) => [
          vault.vault_id ?? identifierOf(vault.name),
          vault.name,
          vault.apy,
          amountWithRaw(vault.total_assets),
          vault.status,
          vault.address,
        ]),
      );
    }
    out.table(
      ['vault', 'apy %', 'total assets', 'status', 'address'],
      vaults.map((vault) => [
        vault.vault_id ?? identifierOf(vault.name),
        vault.apy,
        `${vault.total_assets} USDC`,
        vault.status,
        shortAddress(vault.address),
      ]),
    );
  });
}
