import { Command } from 'commander';
import { action } from '../../action.ts';
import { positiveCount } from '../../args.ts';
import type { Context } from '../../context.ts';
import { wideOption } from '../../format.ts';

/** `agentctl watch transactions [--vault] [--count n]`, as typed. */
export interface WatchTransactionsOptions {
  /** Only this vault's: an address, or a vault id looked up on the data API. */
  vault?: string | undefined;
  count?: number | undefined;
  /** Human lines with the user, the hash and raw units whole (one line per event). */
  wide?: boolean | undefined;
}

export function transactionsCommand(): Command {
  return new Command('transactions')
    .description('every vault transaction as it is indexed, or one vault’s with --vault')
    .option('--vault <vault>', 'only this vault: an address or a vault id')
    .option('--count <n>', 'stop after this many events', positiveCount)
    .addOption(wideOption())
    .addHelpText(
      'after',
      '\nExamples:\n  agentctl watch transactions --vault moderate\n  agentctl watch transactions --vault moderate --json',
    )
    .action(action((context, command) => run(command.opts<WatchTransactionsOptions>(), context)));
}

export async function run(options: WatchTransactionsOptions, context: Context): Promise<void> {
  const { vaultAddressOver } = await import('../../graphql.ts');
  const { follow, transactionLine, TRANSACTION_SUBSCRIPTION, vaultLabel } = await import(
    '../../watch.ts'
  );
  const address =
    options.vault === undefined ? null : await vaultAddressOver(context, options.vault);
  const out = await context.output();
  await follow(
    context,
    {
      query: TRANSACTION_SUBSCRIPTION,
      variables: { vault: address },
      count: options.count,
      awaiting:
        options.vault === undefined || address === null
          ? 'the next transaction'
          : `the next transaction in vault ${vaultLabel(options.vault, address)}`,
    },
    (data) => {
      const line = transactionLine(data.transactionCreated, options.wide);
      out.print(out.json ? JSON.stringify(data.transactionCreated) : line);
    },
  );
}
