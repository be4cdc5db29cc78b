import { Command } from 'commander';
import { action } from '../../action.ts';
import type { Context } from '../../context.ts';
import { clip, shortAddress, timeWithHint, wideOption } from '../../format.ts';
import { showRead } from '../../read.ts';

/** `agentctl strategy list [--wide]`. */
export interface StrategyListOptions {
  /** Ids, names and both times whole. */
  wide?: boolean | undefined;
}

export function listCommand(): Command {
  return new Command('list')
    .description("List the agent's strategies, enumerated onchain from the registry.")
    .addOption(wideOption())
    .addHelpText('after', '\nExamples:\n  agentctl strategy list\n  agentctl strategy list --wide')
    .action(
      action((context, command) =>
        run({ wide: command.opts<StrategyListOptions>().wide }, context),
      ),
    );
}

export async function run(options: StrategyListOptions, context: Context): Promise<void> {
  const client = await context.authenticatedClient();
  const out = await context.output();
  await showRead(out, client.strategies, [], ({ strategies }) => {
    if (strategies.length === 0) return out.print('no strategies');
    // Hints count from the service's clock: a sandbox's, which `sandbox advance` moves.
    const now = context.nowMs();
    if (options.wide) {
      return out.table(
        ['strategy id', 'name', 'status', 'created', 'last change'],
        strategies.map((s) => [
          s.strategy_id,
          s.name,
          s.status,
          timeWithHint(s.created_at, now),
          timeWithHint(s.last_status_change, now),
        ]),
      );
    }
    // 80 columns: the name over the shortened id, the last change with its hint under it.
    out.table(
      ['strategy', 'status', 'last change'],
      strategies.map((s) => [
        `${clip(s.name, 24)}\n${shortAddress(s.strategy_id)}`,
        s.status,
        timeWithHint(s.last_status_change, now).replace(' (', '\n('),
      ]),
    );
  });
}
