import { Command, InvalidArgumentError } from 'commander';
import { action } from '../action.ts';

/**
 * `agentctl watch`: follows the data API's GraphQL subscriptions over WebSocket
 * (graphql-transport-ws) at the data URL. One line per event, or one JSON object per line
 * with --json; --count N stops after N events; Ctrl-C ends with exit 130. A dropped
 * connection is reopened with backoff (said on stderr), and the subscription resumes from
 * then on: events in between are not replayed. The work is in ../watch.ts, loaded on use.
 */

const positive = (value: string) => {
  if (!/^\d+$/.test(value) || Number(value) < 1) {
    throw new InvalidArgumentError('must be a whole number, at least 1');
  }
  return Number(value);
};

const DATA_URL_HELP =
  "data API URL (env AGENTCTL_DATA_URL; default: the profile's data_url, else the base URL)";

export function watchCommand(): Command {
  const watch = new Command('watch')
    .summary('follow vault updates or new transactions as they happen')
    .description(
      "Follow the data API's GraphQL subscriptions (vaultUpdated, transactionCreated) over its WebSocket. One line per event; --json prints one JSON object per line. Ends after --count events, or with Ctrl-C (exit 130); a dropped connection is reopened with backoff.",
    )
    .option('--data-url <url>', DATA_URL_HELP)
    .addHelpText(
      'after',
      '\nExamples:\n  agentctl watch vault moderate\n  agentctl watch transactions --vault configurable --json\n  agentctl watch transactions --count 1 --json   # wait for the next transaction',
    );

  watch
    .command('vault')
    .description("a vault's TVL, share price and APY after every block that changes it")
    .argument('<vault>', 'a vault address, or a vault id: conservative, moderate, aggressive, …')
    .option('--count <n>', 'stop after this many events', positive)
    .addHelpText('after', '\nExample:\n  agentctl watch vault moderate --count 3 --json')
    .action(
      action(async (context, command) => {
        const [vault] = command.processedArgs as [string];
        const { count } = command.opts<{ count?: number }>();
        const { watchVault } = await import('../watch.ts');
        await watchVault(context, vault, count);
      }),
    );

  watch
    .command('transactions')
    .description('every vault transaction as it is indexed, or one vault’s with --vault')
    .option('--vault <vault>', 'only this vault: an address or a vault id')
    .option('--count <n>', 'stop after this many events', positive)
    .addHelpText('after', '\nExample:\n  agentctl watch transactions --vault moderate --json')
    .action(
      action(async (context, command) => {
        const { vault, count } = command.opts<{ vault?: string; count?: number }>();
        const { watchTransactions } = await import('../watch.ts');
        await watchTransactions(context, vault, count);
      }),
    );
  return watch;
}
