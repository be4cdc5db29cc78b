import { Command } from 'commander';
import { action } from '../../action.ts';
import type { Context } from '../../context.ts';
import { CliError, EXIT } from '../../exit-codes.ts';
import { TABLE_WIDTH } from '../../format.ts';
import { showRead } from '../../read.ts';
import { percent, timeText } from './shared.ts';

export interface DataStrategyOptions {
  /** 0x and 64 hex digits. */
  id: string;
}

export function strategyCommand(): Command {
  return new Command('strategy')
    .description("one strategy's performance: its metrics and daily returns")
    .argument('<id>', 'the strategy id (0x and 64 hex digits)')
    .addHelpText('after', '\nExample:\n  agentctl data strategy 0x3f…')
    .action(action((context, command) => run({ id: command.processedArgs[0] as string }, context)));
}

export async function run(options: DataStrategyOptions, context: Context): Promise<void> {
  const { id } = options;
  if (!/^0x[0-9a-fA-F]{64}$/.test(id)) {
    throw new CliError(`strategy ${id}: must be 0x followed by 64 hex digits`, EXIT.usage);
  }
  const client = await context.dataClient();
  const out = await context.output();
  await showRead(out, client.data.performance, [id], async (performance) => {
    const returns = performance.returns;
    const now = context.nowMs();
    out.fields({
      name: performance.name,
      id: performance.id,
      status: performance.status,
      apy: percent(performance.apy),
      'sharpe ratio': performance.sharpeRatio,
      'max drawdown': percent(performance.maxDrawdown),
      days: returns.length,
      ...(returns.length > 0 && {
        from: timeText(returns[0]?.timestamp ?? null, now),
        to: timeText(returns.at(-1)?.timestamp ?? null, now),
      }),
    });
    if (returns.length === 0) return;
    const { chart } = await import('../../chart.ts');
    let value = 100;
    const growth = returns.map((r) => (value *= 1 + r.value / 100));
    out.print('');
    out.print('value of 100 since paper trading');
    const xLabels = [
      (returns[0]?.timestamp ?? '').slice(0, 10),
      (returns.at(-1)?.timestamp ?? '').slice(0, 10),
    ] as const;
    for (const line of chart(growth, {
      height: 6,
      lineWidth: TABLE_WIDTH,
      label: (v) => v.toFixed(2),
      xLabels,
    })) {
      out.print(line);
    }
  });
}
