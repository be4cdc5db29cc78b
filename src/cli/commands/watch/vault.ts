import { Command } from 'commander';
import { action } from '../../action.ts';
import { positiveCount } from '../../args.ts';
import type { Context } from '../../context.ts';
import { wideOption } from '../../format.ts';

/** `agentctl watch vault <vault> [--count n]`, as typed. */
export interface WatchVaultOptions {
  /** A vault address, or a vault id looked up on the data API. */
  vault: string;
  count?: number | undefined;
  /** Human lines with the vault's name and raw units. */
  wide?: boolean | undefined;
}

export function vaultCommand(): Command {
  return new Command('vault')
    .description("a vault's TVL, share price and APY after every block that changes it")
    .argument('<vault>', 'a vault address, or a vault id: conservative, moderate, aggressive, …')
    .option('--count <n>', 'stop after this many events', positiveCount)
    .addOption(wideOption())
    .addHelpText('after', '\nExample:\n  agentctl watch vault moderate --count 3 --json')
    .action(
      action((context, command) => {
        const [vault] = command.processedArgs as [string];
        const { count, wide } = command.opts<{ count?: number; wide?: boolean }>();
        return run({ vault, count, wide }, context);
      }),
    );
}

export async function run(options: WatchVaultOptions, context: Context): Promise<void> {
  const { vaultAddressOver } = await import('../../graphql.ts');
  const { follow, vaultLine, VAULT_SUBSCRIPTION, vaultLabel } = await import('../../watch.ts');
  const address = await vaultAddressOver(context, options.vault);
  const out = await context.output();
  await follow(
    context,
    {
      query: VAULT_SUBSCRIPTION,
      variables: { address },
      count: options.count,
      awaiting: `the next change to vault ${vaultLabel(options.vault, address)}`,
    },
    (data) => {
      // Checked (and so refused when unreadable) whether printed as received or as a line.
      const line = vaultLine(data.vaultUpdated, options.wide);
      out.print(out.json ? JSON.stringify(data.vaultUpdated) : line);
    },
  );
}
