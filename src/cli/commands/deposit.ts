import { Command } from 'commander';
import { VAULT_IDS } from '../../api/schemas/values.ts';
import { action } from '../action.ts';
import { decimalText, vaultId } from '../args.ts';
import type { Context } from '../context.ts';
import { CliError, EXIT } from '../exit-codes.ts';
import {
  amountWithRaw,
  rawWithAmount,
  shortAddress,
  TABLE_WIDTH,
  timeWithHint,
  wrapText,
} from '../format.ts';

/** `agentctl deposit <vault> <amount>`, as typed. */
export interface DepositOptions {
  vault: string;
  amount: string;
  /** --yes: do not ask on a terminal. */
  yes: boolean;
}

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
      action((context, command) => {
        const [vault, amount] = command.processedArgs as [string, string];
        return run({ vault, amount, yes: Boolean(command.opts().yes) }, context);
      }),
    );
}

/** Every refusal of an amount in the same words: `amount X: <why>`. */
const refuseAmount = (amount: string, why: string) =>
  new CliError(`amount ${amount}: ${why}`, EXIT.usage);

/**
 * The request body, checked as the service would check it. A negative amount gets the words
 * zero gets (both are "not more than 0"), rather than the parser's "not a number".
 */
async function depositBody(options: DepositOptions) {
  const vault = vaultId(options.vault);
  if (/^-(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/.test(options.amount)) {
    throw refuseAmount(options.amount, 'must be greater than 0');
  }
  const amount = decimalText('amount', options.amount);
  const { DepositRequest, exactNumber } = await import('../../api/schemas/index.ts');
  // Checked from its digits, as the service would: 1.0000000000000000001 is not 1.
  const parsed = DepositRequest.safeParse({
    vault_id: vault,
    amount_usdc: exactNumber(Number(amount), amount),
  });
  if (!parsed.success) {
    throw refuseAmount(options.amount, parsed.error.issues.map((i) => i.message).join('; '));
  }
  // Valid amounts have at most 15 significant digits: a JS number carries them exactly.
  return { vault_id: parsed.data.vault_id, amount_usdc: Number(parsed.data.amount_usdc) };
}

export async function run(options: DepositOptions, context: Context): Promise<void> {
  const body = await depositBody(options);
  const client = await context.authenticatedClient();
  const { canPrompt } = await import('../tty.ts');
  if (!options.yes && canPrompt()) {
    const { confirmUnlessYes } = await import('../prompts.ts');
    // Say where the money goes: which wallet, which service, which profile.
    const wallet = await client.wallet().then(
      (answer) => answer.data.agent_address,
      () => undefined,
    );
    await confirmUnlessYes(
      `Deposit ${body.amount_usdc} USDC into ${body.vault_id}${wallet ? ` from ${shortAddress(wallet)}` : ''} on ${client.baseUrl} (profile ${context.profileName})?`,
      false,
    );
  }
  const out = await context.output();
  const response = await out.progress('waiting for approve and deposit to confirm', () =>
    client.deposit(body),
  );
  out.writeResult(response, (result) => {
    // Each line within 80 columns: a sentence wraps, the hashes and address have lines of their own.
    const sentence = (text: string) => {
      for (const line of wrapText(text, TABLE_WIDTH)) out.print(line);
    };
    // shares_balance is every share the agent holds in the vault, not this deposit's.
    // The vault by the id it was asked by (the service's name for it is longer).
    const vault = body.vault_id;
    const balance = `${rawWithAmount(result.shares_balance, 'shares')}, all the agent's shares in ${vault}`;
    if (result.status === 'pending') {
      // The ERC-7540 vault: a request, fulfilled (and claimed for the agent) later.
      sentence(
        `requested a deposit of ${amountWithRaw(result.amount_usdc)} into ${vault}: pending`,
      );
      out.fields({
        vault: result.vault_address,
        'approve tx': result.approve_tx,
        'request tx': result.deposit_tx,
        ...(result.request_id !== undefined && { 'request id': result.request_id }),
        ...(result.fulfillable_at !== undefined && {
          fulfilled: `at ${timeWithHint(result.fulfillable_at, context.nowMs())} by the sandbox's clock, or soon after; the shares are then claimed into the agent's wallet`,
        }),
        balance: `${balance}, before the claim`,
      });
      out.print('follow it with: agentctl data transactions --type deposit_request');
      return;
    }
    sentence(`deposited ${amountWithRaw(result.amount_usdc)} into ${vault}`);
    out.fields({
      vault: result.vault_address,
      'approve tx': result.approve_tx,
      'deposit tx': result.deposit_tx,
      balance,
    });
  });
}
