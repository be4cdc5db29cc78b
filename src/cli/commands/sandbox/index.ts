import { Command, Option } from 'commander';
import { advanceCommand } from './advance.ts';
import { exportCommand } from './export.ts';
import { fulfillmentDelayCommand } from './fulfillment-delay.ts';
import { fundCommand } from './fund.ts';
import { infoCommand } from './info.ts';
import { nodeCommand } from './node.ts';
import { proposalCommand } from './proposal.ts';
import { restoreCommand } from './restore.ts';
import { seedCommand } from './seed.ts';
import { snapshotCommand } from './snapshot.ts';
import { snapshotDeleteCommand } from './snapshot-delete.ts';
import { snapshotsCommand } from './snapshots.ts';
import { strategyStatusCommand } from './strategy-status.ts';
import { tierCommand } from './tier.ts';

/** `agentctl sandbox`: the admin API of `agentctl serve`, one file per verb. */
export function sandboxCommand(): Command {
  const sandbox = new Command('sandbox')
    .summary('the sandbox admin API (agentctl serve only)')
    .description(
      "Drive the local sandbox: its clock, tiers, funds, proposals, strategy statuses, the ERC-7540 vault's fulfilment delay and data API nodes; seed files that create a whole scenario; snapshots of all its state (take, restore, list, delete, export to a file).",
    )
    .addHelpText(
      'after',
      '\nExamples:\n  agentctl sandbox advance 86400\n  agentctl sandbox tier 0xYourWallet established\n  agentctl sandbox snapshot base && agentctl sandbox restore base\n  agentctl sandbox --admin-token TOKEN info',
    )
    .addOption(
      new Option('--admin-token <token>', 'the token serve printed at start').env(
        'AGENTCTL_ADMIN_TOKEN',
      ),
    );
  for (const command of [
    infoCommand(),
    advanceCommand(),
    tierCommand(),
    fundCommand(),
    proposalCommand(),
    strategyStatusCommand(),
    fulfillmentDelayCommand(),
    nodeCommand(),
    snapshotCommand(),
    restoreCommand(),
    snapshotsCommand(),
    snapshotDeleteCommand(),
    exportCommand(),
    seedCommand(),
  ]) {
    sandbox.addCommand(command);
  }
  return sandbox;
}
