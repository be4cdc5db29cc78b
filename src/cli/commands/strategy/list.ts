import { Command } from 'commander';
import { action } from '../../action.ts';
import type { Context } from '../../context.ts';
import { timeWithHint } from '../../format.ts';
import { showRead } from '../../read.ts';

/** `agentctl strategy list` takes no options of its own. */
export type StrategyListOptions = Record<string, never>;

export function listCommand(): Command {
  return new Command('list')
    .description("List the agent's strategies, enumerated onchain from the registry.")
    .addHelpText('after', '\nExample:\n  agentctl strategy list')
    .action(action((context) => run({}, context)));
}

export async function run(_options: StrategyListOptions, context: Context): Promise<void> {
  const client = await context.authenticatedClient();
  const out = await context.output();
  await showRead(out, client.strategies, [], ({ strategies }) => {
    if (strategies.length === 0) return out.print('no strategies');
    // Hints count from the service's clock: a sandbox's, which `sandbox advance` moves.
    const now = context.nowMs();
    out.table(
      ['strategy id', 'name', 'status', 'created', 'last change'],
      strategies.map((s) => [
        s.strategy_id,
        s.name,
        s.status,
        timeWithHint(s.created_at, now),
        timeWithHint(s.last_status_change, now),
      ]),
    );
  });
}
