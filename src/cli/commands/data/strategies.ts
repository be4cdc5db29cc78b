import { Command, Option } from 'commander';
import { action } from '../../action.ts';
import type { Context } from '../../context.ts';
import { CliError, EXIT } from '../../exit-codes.ts';
import { clip, shortAddress, wideOption } from '../../format.ts';
import { showRead } from '../../read.ts';
import { percent } from './shared.ts';

const STRATEGY_STATUSES = ['shadow', 'evolution', 'live', 'deprecated'];

export interface DataStrategiesOptions {
  status?: string;
  /** A number, as typed. */
  minSharpe?: string;
  wide?: boolean;
}

export function strategiesCommand(): Command {
  return new Command('strategies')
    .description('every strategy that is not deprecated, with its simulated performance')
    .addOption(new Option('--status <status>', 'only this status').choices(STRATEGY_STATUSES))
    .option('--min-sharpe <ratio>', 'only strategies with at least this Sharpe ratio')
    .addOption(wideOption())
    .addHelpText('after', '\nExample:\n  agentctl data strategies --status live --min-sharpe 1')
    .action(action((context, command) => run(command.opts<DataStrategiesOptions>(), context)));
}

export async function run(options: DataStrategiesOptions, context: Context): Promise<void> {
  if (options.minSharpe !== undefined && !Number.isFinite(Number(options.minSharpe))) {
    throw new CliError(`--min-sharpe ${options.minSharpe}: must be a number`, EXIT.usage);
  }
  const query = { status: options.status, minSharpe: options.minSharpe };
  const client = await context.dataClient();
  const out = await context.output();
  await showRead(out, client.data.strategies, [query], (body) => {
    if (body.strategies.length === 0) return out.print('no strategies');
    if (options.wide) {
      return out.table(
        ['name', 'agent', 'status', 'apy', 'sharpe', 'max dd', 'risk', 'allocation', 'vault', 'id'],
        body.strategies.map((s) => [
          s.name,
          s.agentName ?? '',
          s.status,
          percent(s.apy),
          s.sharpeRatio,
          percent(s.maxDrawdown),
          s.riskScore,
          s.vault ? percent(s.allocation * 100) : '',
          s.vault ?? '',
          s.id,
        ]),
      );
    }
    out.table(
      ['name', 'status', 'apy', 'sharpe', 'max dd', 'id'],
      body.strategies.map((s) => [
        clip(s.name, 16),
        s.status,
        percent(s.apy),
        Number(s.sharpeRatio.toFixed(2)),
        percent(s.maxDrawdown),
        shortAddress(s.id),
      ]),
    );
  });
}
