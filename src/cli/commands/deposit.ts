import { Command } from 'commander';
import { VAULT_IDS } from '../../api/schemas/values.ts';
import { action } from '../action.ts';
import { CliError, EXIT } from '../exit-codes.ts';
import { confirmUnlessYes } from '../prompts.ts';

export function depositCommand(): Command {
  return new Command('deposit')
    .summary('deposit USDC into a vault')
    .description(
      "Deposit USDC from the agent's server-side wallet into a vault (the service sends approve, then deposit). Asks first on a terminal unless --yes.",
    )
    .argument('<vault>', VAULT_IDS.join(' | '))
    .argument('<amount>', 'USDC, up to 6 decimals, for example 100 or 12.5')
    .option('-y, --yes', 'do not ask for confirmation')
    .addHelpText('after', '\nExample:\n  agentctl deposit moderate 100 --yes')
    .action(
      action(async (context, command) => {
        const [vault, amount] = command.processedArgs as [string, string];
        const { DepositRequest, describeZodError, exactNumber } = await import(
          '../../api/schemas/index.ts'
        );
        if (!/^\d+(\.\d+)?$/.test(amount)) {
          throw new CliError(
            `amount ${amount}: must be a positive decimal number, for example 100 or 12.5`,
            EXIT.usage,
          );
        }
        // Checked from its digits, as the service would: 1.0000000000000000001 is not 1.
        const parsed = DepositRequest.safeParse({
          vault_id: vault,
          amount_usdc: exactNumber(Number(amount), amount),
        });
        if (!parsed.success)
          throw new CliError(describeZodError(parsed.error, 'deposit'), EXIT.usage);
        // Valid amounts have at most 15 significant digits: a JS number carries them exactly.
        const body = {
          vault_id: parsed.data.vault_id,
          amount_usdc: Number(parsed.data.amount_usdc),
        };
        const client = await context.authenticatedClient();
        await confirmUnlessYes(
          `Deposit ${amount} USDC into the ${vault} vault?`,
          command.opts().yes,
        );
        const out = await context.output();
        const response = await out.progress('waiting for approve and deposit to confirm', () =>
          client.deposit(body),
        );
        out.writeResult(response, (result) => {
          out.print(
            `deposited ${result.amount_usdc} USDC into ${result.vault} (${result.vault_address})`,
          );
          out.print(`approve tx  ${result.approve_tx}`);
          out.print(`deposit tx  ${result.deposit_tx}`);
          out.print(`shares      ${result.shares_balance} (raw units)`);
        });
      }),
    );
}
