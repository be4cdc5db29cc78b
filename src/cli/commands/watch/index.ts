import { Command } from 'commander';
import { transactionsCommand } from './transactions.ts';
import { vaultCommand } from './vault.ts';

/**
 * `agentctl watch`: follows the data API's GraphQL subscriptions over WebSocket
 * (graphql-transport-ws) at the data URL. One line per event, or one JSON object per line
 * with --json; --count N stops after N events; Ctrl-C ends with exit 130. A dropped
 * connection is reopened with backoff (said on stderr), and the subscription resumes from
 * then on: events in between are not replayed. When the sandbox is restored to a snapshot
 * (close code 4205) it says so (with --json also as a `{"event":"sandbox_restored"}` line)
 * and subscribes again at once. The work is in ../../watch.ts, loaded on use.
 */
export function watchCommand(): Command {
  return new Command('watch')
    .summary('follow vault updates or new transactions as they happen')
    .description(
      'Follow the data API\'s GraphQL subscriptions (vaultUpdated, transactionCreated) over its WebSocket. One line per event, stamped with its block\'s time; --json prints one JSON object per line. Ends after --count events, or with Ctrl-C (exit 130); a dropped connection is reopened with backoff. When the sandbox is restored to a snapshot, it says so (--json: a {"event":"sandbox_restored"} line) and subscribes again at once.',
    )
    .option(
      '--data-url <url>',
      "data API URL (env AGENTCTL_DATA_URL; default: the profile's data_url, else the base URL)",
    )
    .addHelpText(
      'after',
      '\nExamples:\n  agentctl watch vault moderate\n  agentctl watch transactions --vault configurable --json\n  agentctl watch transactions --count 1 --json   # wait for the next transaction',
    )
    .addCommand(vaultCommand())
    .addCommand(transactionsCommand());
}
