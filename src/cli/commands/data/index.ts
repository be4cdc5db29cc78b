import { Command } from 'commander';
import { historyCommand } from './history.ts';
import { nodesCommand } from './nodes.ts';
import { positionsCommand } from './positions.ts';
import { statsCommand } from './stats.ts';
import { strategiesCommand } from './strategies.ts';
import { strategyCommand } from './strategy.ts';
import { transactionsCommand } from './transactions.ts';
import { vaultCommand } from './vault.ts';
import { vaultsCommand } from './vaults.ts';

/**
 * `agentctl data`: Part B, the data API (REST under /v1). Its URL is --data-url,
 * AGENTCTL_DATA_URL or the profile's data_url, else the base URL (the context reads the
 * option). Human tables within 80 columns by default, `--wide` for every value whole;
 * --json prints each body as received.
 */
export function dataCommand(): Command {
  return new Command('data')
    .summary('the data API: vaults, history, strategies, positions, transactions')
    .description(
      "Read the data API (REST under /v1): the sandbox serves it from an index of its chain. Its URL is --data-url, AGENTCTL_DATA_URL or the profile's data_url, else the base URL.",
    )
    .option(
      '--data-url <url>',
      "data API URL (env AGENTCTL_DATA_URL; default: the profile's data_url, else the base URL)",
    )
    .addHelpText(
      'after',
      '\nExamples:\n  agentctl data vaults --sort apy\n  agentctl data history moderate --period 7d --interval 4h\n  agentctl data transactions --type deposit_request',
    )
    .addCommand(vaultsCommand())
    .addCommand(vaultCommand())
    .addCommand(historyCommand())
    .addCommand(strategiesCommand())
    .addCommand(strategyCommand())
    .addCommand(positionsCommand())
    .addCommand(transactionsCommand())
    .addCommand(statsCommand())
    .addCommand(nodesCommand());
}
