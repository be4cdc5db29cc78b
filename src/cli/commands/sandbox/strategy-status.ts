import { Command } from 'commander';
import { STRATEGY_STATUSES } from '../../../api/schemas/values.ts';
import { action } from '../../action.ts';
import { adminTokenOf, adminWrite } from '../../admin.ts';
import type { Context } from '../../context.ts';
import { CliError, EXIT } from '../../exit-codes.ts';
import { suggesting } from '../../suggest.ts';

export interface StrategyStatusOptions {
  adminToken: string | undefined;
  strategyId: string;
  status: string;
}

/**
 * The data API's (and `data strategies`') "evolution" stands for the three review stages
 * between shadow and live; the lifecycle this command sets names each of them.
 */
const EVOLUTION_STAGES = ['guardian_review', 'paper_trading', 'pending_oracle_approval'];

export function strategyStatusCommand(): Command {
  return new Command('strategy-status')
    .description('move a strategy along its lifecycle')
    .argument('<strategy-id>', 'the 0x… id')
    .argument('<status>', STRATEGY_STATUSES.join(' | '))
    .addHelpText(
      'after',
      '\nThe data API shows guardian_review, paper_trading and pending_oracle_approval\nas "evolution", and paused as "live".\n\nExample:\n  agentctl sandbox strategy-status 0x… guardian_review',
    )
    .action(
      action((context, command) => {
        const [strategyId, status] = command.processedArgs as [string, string];
        return run({ adminToken: adminTokenOf(command), strategyId, status }, context);
      }),
    );
}

export async function run(options: StrategyStatusOptions, context: Context): Promise<void> {
  const status = statusOf(options.status);
  const out = await context.output();
  await adminWrite(
    context,
    options.adminToken,
    '/sandbox/strategies/status',
    { strategy_id: options.strategyId, status },
    (s) => s.StrategyStatusResult,
    (result) => out.fields(result),
  );
}

/** A lifecycle status as typed (any case); the data API's "evolution" gets the mapping. */
function statusOf(typed: string): string {
  const status = typed.toLowerCase();
  if ((STRATEGY_STATUSES as readonly string[]).includes(status)) return status;
  if (status === 'evolution') {
    throw new CliError(
      `status evolution: the data API shows ${EVOLUTION_STAGES.join(', ')} all as "evolution"; give the one you mean, for example paper_trading`,
      EXIT.usage,
    );
  }
  throw new CliError(
    suggesting(
      (suggest) =>
        `status ${typed}: must be one of ${STRATEGY_STATUSES.join(', ')}${suggest(status, STRATEGY_STATUSES)}`,
    ),
    EXIT.usage,
  );
}
