import { Command } from 'commander';
import { TIERS } from '../../../api/schemas/values.ts';
import { action } from '../../action.ts';
import { adminTokenOf, adminWrite } from '../../admin.ts';
import { checkAddress } from '../../args.ts';
import type { Context } from '../../context.ts';
import { CliError, EXIT } from '../../exit-codes.ts';
import { suggesting } from '../../suggest.ts';

export interface TierOptions {
  adminToken: string | undefined;
  wallet: string;
  tier: string;
}

export function tierCommand(): Command {
  return new Command('tier')
    .description("set an agent's tier")
    .argument('<wallet>', "the agent's registered wallet")
    .argument('<tier>', TIERS.join(' | '))
    .addHelpText('after', '\nExample:\n  agentctl sandbox tier 0xYourWallet established')
    .action(
      action((context, command) => {
        const [wallet, tier] = command.processedArgs as [string, string];
        return run({ adminToken: adminTokenOf(command), wallet, tier }, context);
      }),
    );
}

export async function run(options: TierOptions, context: Context): Promise<void> {
  const tier = options.tier.toLowerCase();
  if (!(TIERS as readonly string[]).includes(tier)) {
    throw new CliError(
      suggesting(
        (suggest) =>
          `tier ${options.tier}: must be one of ${TIERS.join(', ')}${suggest(tier, TIERS)}`,
      ),
      EXIT.usage,
    );
  }
  const wallet_address = await checkAddress('wallet', options.wallet);
  const out = await context.output();
  await adminWrite(
    context,
    options.adminToken,
    '/sandbox/agents/tier',
    { wallet_address, tier },
    (s) => s.SetTierResponse,
    (result) => out.fields(result),
  );
}
