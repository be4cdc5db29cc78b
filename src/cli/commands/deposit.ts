import { Command } from 'commander';
import { VAULT_IDS } from '../../api/schemas/values.ts';
import { action } from '../action.ts';
import { decimalText, vaultId } from '../args.ts';
import { CliError, EXIT } from '../exit-codes.ts';
import { amountWithRaw, rawWithAmount, shortAddress } from '../format.ts';
import { confirmUnlessYes } from '../prompts.ts';
import { canPrompt } from '../tty.ts';

export function depositCommand(): Command {
  return new Command('deposit')
    .summary('deposit USDC into a vault')
    .description(
      "Deposit USDC from the agent's server-side wallet into a vault (the service sends approve, then deposit). Asks first on a terminal unless --yes.",
    )
    .argument('<vault>', VAULT_IDS.join(' | '))
    .argument('<amount>', 'USDC, up to 6 decimals, for example 100, 12.5 or .5')
    .option('-y, --yes', 'do not ask for confirmation')
    .addHelpText('after', '\nExample:\n  agentctl deposit moderate 100 --yes')
    .action(
      action(async (context, command) => {
        const [vaultArg, amountArg] = command.processedArgs as [string, string];
        const vault = vaultId(vaultArg);
        const amount = decimalText('amount', amountArg);
        const { DepositRequest, describeZodError, exactNumber } = await import(
          '../../api/schemas/index.ts'
        );
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
        if (!command.opts().yes && canPrompt()) {
          // Say where the money goes: which wallet, which service, which profile.
          const wallet = await client.wallet().then(
            (answer) => answer.data.agent_address,
            () => undefined,
          );
          await confirmUnlessYes(
            `Deposit ${parsed.data.amount_usdc} USDC into ${vault}${wallet ? ` from ${shortAddress(wallet)}` : ''} on ${client.baseUrl} (profile ${context.profileName})?`,
            false,
          );
        }
        const out = await context.output();
        const response = await out.progress('waiting for approve and deposit to confirm', () =>
          client.deposit(body),
        );
        out.writeResult(response, (result) => {
          if (result.status === 'pending') {
            // The ERC-7540 vault: a request, fulfilled (and claimed for the agent) later.
            out.print(
              `requested a deposit of ${amountWithRaw(result.amount_usdc)} into ${result.vault} (${result.vault_address}): pending`,
            );
            out.print(`approve tx  ${result.approve_tx}`);
            out.print(`request tx  ${result.deposit_tx}`);
            if (result.request_id !== undefined) out.print(`request id  ${result.request_id}`);
            if (result.fulfillable_at !== undefined) {
              out.print(
                `fulfilled   at ${new Date(result.fulfillable_at * 1000).toISOString()} sandbox time, or soon after; the shares are then claimed into the agent's wallet`,
              );
            }
            out.print(`shares      ${rawWithAmount(result.shares_balance)} (before the claim)`);
            out.print('follow it with: agentctl data transactions --type deposit_request');
            return;
          }
          out.print(
            `deposited ${amountWithRaw(result.amount_usdc)} into ${result.vault} (${result.vault_address})`,
          );
          out.print(`approve tx  ${result.approve_tx}`);
          out.print(`deposit tx  ${result.deposit_tx}`);
          out.print(`shares      ${rawWithAmount(result.shares_balance)}`);
        });
      }),
    );
}
