import { Command, Option } from 'commander';
import { VAULT_IDS } from '../../../api/schemas/values.ts';
import { action } from '../../action.ts';
import type { Context } from '../../context.ts';
import { TABLE_WIDTH } from '../../format.ts';
import { showRead } from '../../read.ts';
import { percent, timeText, usdc, vaultAddress, vaultIdOf } from './shared.ts';

const PERIODS = ['7d', '30d', '90d', '1y', 'all'];
const INTERVALS = ['1h', '4h', '1d', '1w'];

export interface DataHistoryOptions {
  /** An address or a vault id. */
  vault: string;
  period: string;
  interval: string;
}

export function historyCommand(): Command {
  return new Command('history')
    .description("a vault's TVL, APY and share price over time, drawn as charts")
    .argument('<vault>', `an address, or ${VAULT_IDS.join(' | ')}`)
    .addOption(new Option('--period <period>', 'how far back').choices(PERIODS).default('30d'))
    .addOption(
      new Option('--interval <interval>', 'one point per').choices(INTERVALS).default('1d'),
    )
    .addHelpText('after', '\nExample:\n  agentctl data history moderate --period 90d --interval 1w')
    .action(
      action((context, command) =>
        run(
          {
            vault: command.processedArgs[0] as string,
            ...command.opts<{ period: string; interval: string }>(),
          },
          context,
        ),
      ),
    );
}

export async function run(options: DataHistoryOptions, context: Context): Promise<void> {
  const address = await vaultAddress(context, options.vault);
  const query = { period: options.period, interval: options.interval };
  const client = await context.dataClient();
  const out = await context.output();
  await showRead(out, client.data.history, [address, query], async (history) => {
    // The vault's name, and its APY now: a history point's `apy` is what the share price
    // earned over that point's interval (annualised), while the APY now is the rate it grows
    // at now, `data vault`'s "apy now". The last point's differs from it whenever the vault's
    // holdings changed during the last interval.
    const { data: vault } = await client.data.vault(address);
    const now = context.nowMs();
    const points = history.points;
    const id = vaultIdOf(vault.name);
    out.fields({
      vault: id ? `${vault.name} (${id})` : vault.name,
      address: history.address,
      points: `${points.length}, one per ${history.interval} over ${history.period}`,
      ...(points.length > 0 && {
        from: timeText(points[0]?.timestamp ?? null, now),
        to: timeText(points.at(-1)?.timestamp ?? null, now),
      }),
    });
    if (points.length === 0) return;
    const { chart } = await import('../../chart.ts');
    const first = points[0]?.timestamp ?? '';
    const last = points.at(-1)?.timestamp ?? '';
    const xLabels = [axisTime(first), axisTime(last)] as const;
    const draw = (
      title: string,
      values: number[],
      height: number,
      label: (v: number) => string,
    ) => {
      out.print('');
      out.print(title);
      for (const line of chart(values, { height, lineWidth: TABLE_WIDTH, label, xLabels })) {
        out.print(line);
      }
    };
    draw(
      'TVL (USDC)',
      points.map((p) => Number(p.tvl) / 1e6),
      8,
      (v) => v.toLocaleString('en-US', { maximumFractionDigits: 2 }),
    );
    draw(
      `APY over each ${history.interval} (%)`,
      points.map((p) => p.apy),
      6,
      (v) => v.toFixed(2),
    );
    out.print('');
    out.fields({
      tvl: usdc(vault.tvl),
      'apy now': percent(vault.apy.current),
      'price per share': usdc(vault.pricePerShare),
    });
  });
}

/** A time under a chart: ISO 8601 to the minute ("2026-11-28T11:20Z"). */
function axisTime(iso: string): string {
  const ms = Date.parse(iso);
  return Number.isNaN(ms) ? iso : new Date(ms).toISOString().replace(/:\d\d\.\d{3}Z$/, 'Z');
}
