import { Command } from 'commander';
import { action } from '../../action.ts';
import { adminTokenOf, adminWrite } from '../../admin.ts';
import type { Context } from '../../context.ts';
import { CliError, EXIT } from '../../exit-codes.ts';

export interface FulfillmentDelayOptions {
  adminToken: string | undefined;
  /** As typed: checked by run(). */
  seconds: string;
}

export function fulfillmentDelayCommand(): Command {
  return new Command('fulfillment-delay')
    .description(
      'set how long the ERC-7540 vault (configurable) waits before fulfilling a request, in sandbox seconds',
    )
    .argument('<seconds>', 'a whole number, 0 or more (default 3600)')
    .addHelpText('after', '\nExample:\n  agentctl sandbox fulfillment-delay 60')
    .action(
      action((context, command) =>
        run(
          { adminToken: adminTokenOf(command), seconds: command.processedArgs[0] as string },
          context,
        ),
      ),
    );
}

export async function run(options: FulfillmentDelayOptions, context: Context): Promise<void> {
  if (!/^\d+$/.test(options.seconds)) {
    throw new CliError(
      `seconds ${options.seconds}: give a whole number of seconds, 0 or more`,
      EXIT.usage,
    );
  }
  const out = await context.output();
  await adminWrite(
    context,
    options.adminToken,
    '/sandbox/vaults/fulfillment-delay',
    { vault_id: 'configurable', seconds: Number(options.seconds) },
    (s) => s.FulfillmentDelayResult,
    (result) => out.fields({ ...result, fulfillment_delay: `${result.fulfillment_delay} s` }),
  );
}
