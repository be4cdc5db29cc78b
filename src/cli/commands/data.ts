import { Command, Option } from 'commander';
import { VAULT_IDS } from '../../api/schemas/values.ts';
import { action } from '../action.ts';
import { checkAddress, usdcToRaw, vaultId, wholeNumber } from '../args.ts';
import type { Context } from '../context.ts';
import { CliError, EXIT } from '../exit-codes.ts';
import { rawWithAmount } from '../format.ts';

/**
 * `agentctl data`: Part B, the data API (REST under /v1). Its URL is --data-url,
 * AGENTCTL_DATA_URL or the profile's data_url, else the base URL. Human tables by default;
 * --json prints each body as received.
 */

const RISK_LEVELS = ['conservative', 'moderate', 'aggressive'];
const STRATEGY_STATUSES = ['shadow', 'evolution', 'live', 'deprecated'];
const TRANSACTION_TYPES = ['deposit', 'withdraw', 'deposit_request', 'redeem_request', 'claim'];
const PERIODS = ['7d', '30d', '90d', '1y', 'all'];
const INTERVALS = ['1h', '4h', '1d', '1w'];
const PAGE_MAX = 100;

const percent = (value: number) => `${Number(value.toFixed(4))} %`;
const usdc = (raw: string) => rawWithAmount(raw, 'USDC');

/** A vault address, or a vault id (conservative, …) looked up in the data API's list by name. */
async function vaultAddress(context: Context, value: string): Promise<string> {
  if (value.startsWith('0x')) return checkAddress('vault', value);
  // Any case; an unknown id is refused with the ids, and a near miss gets a suggestion.
  const id = vaultId(value);
  const listed = (await (await context.dataClient()).data.vaults()).data.vaults;
  const found = listed.find((vault) => vault.name.toLowerCase().includes(id));
  if (!found) {
    throw new CliError(
      `vault ${value}: the data API lists no vault named for it; give the vault's address`,
      EXIT.usage,
    );
  }
  return found.address;
}

/** An address given, or the agent's server-side wallet (needs the profile's API key). */
async function userAddress(context: Context, given: string | undefined): Promise<string> {
  if (given !== undefined) return checkAddress('address', given);
  const client = await context.client();
  if (!(await client.hasApiKey())) {
    throw new CliError(
      `no address given and no API key for profile "${context.profileName}" to find the agent's wallet: give an address, or run \`agentctl register\``,
      EXIT.usage,
    );
  }
  return (await (await context.authenticatedClient()).wallet()).data.agent_address;
}

export function dataCommand(): Command {
  const data = new Command('data')
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
    );

  data
    .command('vaults')
    .description('every vault with its TVL, APY and risk level')
    .addOption(new Option('--risk <level>', 'only this risk level').choices(RISK_LEVELS))
    .option('--min-tvl <usdc>', 'only vaults holding at least this many USDC')
    .addOption(new Option('--sort <field>', 'highest first').choices(['tvl', 'apy']))
    .addHelpText('after', '\nExample:\n  agentctl data vaults --risk moderate --sort tvl')
    .action(
      action(async (context, command) => {
        const options = command.opts<{ risk?: string; minTvl?: string; sort?: string }>();
        const query = {
          riskLevel: options.risk,
          minTvl: options.minTvl === undefined ? undefined : usdcToRaw('--min-tvl', options.minTvl),
          orderBy: options.sort && `${options.sort}_desc`,
        };
        const client = await context.dataClient();
        const out = await context.output();
        if (out.json) return out.raw((await client.data.vaults.asReceived(query)).text);
        const { data: body } = await client.data.vaults(query);
        out.table(
          ['name', 'tvl', 'apy', 'risk', 'strategies', 'async', 'address'],
          body.vaults.map((vault) => [
            vault.name,
            usdc(vault.tvl),
            percent(vault.apy),
            vault.riskLevel,
            vault.strategies,
            vault.isERC7540 ? `ERC-7540, ${vault.fulfillmentDelay ?? '?'} s` : 'no',
            vault.address,
          ]),
        );
        out.print(`total tvl ${usdc(body.totalTvl)}`);
      }),
    );

  data
    .command('vault')
    .description("one vault's detail: share price, APYs over time, strategies")
    .argument('<vault>', `an address, or ${VAULT_IDS.join(' | ')}`)
    .addHelpText('after', '\nExample:\n  agentctl data vault configurable')
    .action(
      action(async (context, command) => {
        const address = await vaultAddress(context, command.processedArgs[0] as string);
        const client = await context.dataClient();
        const out = await context.output();
        if (out.json) return out.raw((await client.data.vault.asReceived(address)).text);
        const { data: vault } = await client.data.vault(address);
        out.fields({
          name: vault.name,
          address: vault.address,
          asset: vault.asset,
          tvl: usdc(vault.tvl),
          'total shares': rawWithAmount(vault.totalShares),
          'price per share': usdc(vault.pricePerShare),
          'apy now': percent(vault.apy.current),
          'apy 7d': percent(vault.apy['7d']),
          'apy 30d': percent(vault.apy['30d']),
          'apy since inception': percent(vault.apy.inception),
          fees: `management ${vault.fees.management} %, performance ${vault.fees.performance} %, hurdle ${vault.fees.hurdle} %`,
          'ERC-7540': vault.isERC7540
            ? `yes, requests fulfilled after ${vault.fulfillmentDelay} s`
            : 'no',
        });
        if (vault.strategies.length > 0) {
          out.table(
            ['strategy', 'allocation', 'apy', 'id'],
            vault.strategies.map((s) => [
              s.name,
              percent(s.allocation * 100),
              percent(s.apy),
              s.id,
            ]),
          );
        }
      }),
    );

  data
    .command('history')
    .description("a vault's TVL, APY and share price over time, drawn as charts")
    .argument('<vault>', `an address, or ${VAULT_IDS.join(' | ')}`)
    .addOption(new Option('--period <period>', 'how far back').choices(PERIODS).default('30d'))
    .addOption(
      new Option('--interval <interval>', 'one point per').choices(INTERVALS).default('1d'),
    )
    .addHelpText('after', '\nExample:\n  agentctl data history moderate --period 90d --interval 1w')
    .action(
      action(async (context, command) => {
        const address = await vaultAddress(context, command.processedArgs[0] as string);
        const query = command.opts<{ period: string; interval: string }>();
        const client = await context.dataClient();
        const out = await context.output();
        if (out.json) return out.raw((await client.data.history.asReceived(address, query)).text);
        const { data: history } = await client.data.history(address, query);
        const points = history.points;
        if (points.length === 0) return out.print('no points');
        const { chart } = await import('../chart.ts');
        const width = Math.max(20, Math.min(points.length, (process.stdout.columns ?? 80) - 24));
        const first = points[0]?.timestamp;
        const last = points.at(-1)?.timestamp;
        out.print(`${history.address}: ${points.length} points, ${first} to ${last}`);
        out.print('');
        out.print('TVL (USDC)');
        for (const line of chart(
          points.map((p) => Number(p.tvl) / 1e6),
          { width, label: (v) => v.toLocaleString('en-US', { maximumFractionDigits: 2 }) },
        )) {
          out.print(line);
        }
        out.print('');
        out.print('APY (%)');
        for (const line of chart(
          points.map((p) => p.apy),
          { width, height: 6, label: (v) => v.toFixed(2) },
        )) {
          out.print(line);
        }
        out.print('');
        const latest = points.at(-1);
        if (latest) {
          out.print(
            `now: tvl ${usdc(latest.tvl)}, apy ${percent(latest.apy)}, price per share ${usdc(latest.pricePerShare)}`,
          );
        }
      }),
    );

  data
    .command('strategies')
    .description('every strategy that is not deprecated, with its simulated performance')
    .addOption(new Option('--status <status>', 'only this status').choices(STRATEGY_STATUSES))
    .option('--min-sharpe <ratio>', 'only strategies with at least this Sharpe ratio')
    .addHelpText('after', '\nExample:\n  agentctl data strategies --status live --min-sharpe 1')
    .action(
      action(async (context, command) => {
        const options = command.opts<{ status?: string; minSharpe?: string }>();
        if (options.minSharpe !== undefined && !Number.isFinite(Number(options.minSharpe))) {
          throw new CliError(`--min-sharpe ${options.minSharpe}: must be a number`, EXIT.usage);
        }
        const query = { status: options.status, minSharpe: options.minSharpe };
        const client = await context.dataClient();
        const out = await context.output();
        if (out.json) return out.raw((await client.data.strategies.asReceived(query)).text);
        const { data: body } = await client.data.strategies(query);
        if (body.strategies.length === 0) return out.print('no strategies');
        out.table(
          ['name', 'agent', 'status', 'apy', 'sharpe', 'max dd', 'risk', 'allocation', 'id'],
          body.strategies.map((s) => [
            s.name,
            s.agentName ?? '',
            s.status,
            percent(s.apy),
            s.sharpeRatio,
            percent(s.maxDrawdown),
            s.riskScore,
            s.vault ? percent(s.allocation * 100) : '',
            s.id,
          ]),
        );
      }),
    );

  data
    .command('strategy')
    .description("one strategy's performance: its metrics and daily returns")
    .argument('<id>', 'the strategy id (0x and 64 hex digits)')
    .addHelpText('after', '\nExample:\n  agentctl data strategy 0x3f…')
    .action(
      action(async (context, command) => {
        const id = command.processedArgs[0] as string;
        if (!/^0x[0-9a-fA-F]{64}$/.test(id)) {
          throw new CliError(`strategy ${id}: must be 0x followed by 64 hex digits`, EXIT.usage);
        }
        const client = await context.dataClient();
        const out = await context.output();
        if (out.json) return out.raw((await client.data.performance.asReceived(id)).text);
        const { data: performance } = await client.data.performance(id);
        out.fields({
          name: performance.name,
          id: performance.id,
          status: performance.status,
          apy: percent(performance.apy),
          'sharpe ratio': performance.sharpeRatio,
          'max drawdown': percent(performance.maxDrawdown),
          days: performance.returns.length,
        });
        if (performance.returns.length > 0) {
          const { chart } = await import('../chart.ts');
          let value = 100;
          const growth = performance.returns.map((r) => (value *= 1 + r.value / 100));
          out.print('');
          out.print('value of 100 since paper trading');
          const width = Math.max(20, Math.min(growth.length, (process.stdout.columns ?? 80) - 16));
          for (const line of chart(growth, { width, height: 6, label: (v) => v.toFixed(2) })) {
            out.print(line);
          }
        }
      }),
    );

  data
    .command('positions')
    .description("a wallet's vault positions, with value, pnl and ERC-7540 requests")
    .argument('[address]', "the wallet (default: the profile's agent wallet)")
    .addHelpText(
      'after',
      '\nExample:\n  agentctl data positions 0x000000000000000000000000000000000000dEaD',
    )
    .action(
      action(async (context, command) => {
        const address = await userAddress(context, command.processedArgs[0] as string | undefined);
        const client = await context.dataClient();
        const out = await context.output();
        if (out.json) return out.raw((await client.data.positions.asReceived(address)).text);
        const { data: body } = await client.data.positions(address);
        if (body.positions.length === 0) return out.print(`no positions for ${body.address}`);
        out.table(
          ['vault', 'shares', 'value', 'pnl', 'pnl %', 'pending', 'claimable', 'since'],
          body.positions.map((p) => [
            p.vaultName,
            rawWithAmount(p.shares),
            usdc(p.value),
            p.pnl.startsWith('-') ? `-${usdc(p.pnl.slice(1))}` : usdc(p.pnl),
            percent(p.pnlPercent),
            requestsText(p.pendingDeposit, p.pendingRedeem),
            requestsText(p.claimableDeposit, p.claimableRedeem),
            p.depositedAt ?? '',
          ]),
        );
      }),
    );

  data
    .command('transactions')
    .description("a wallet's vault transactions, newest first")
    .argument('[address]', "the wallet (default: the profile's agent wallet)")
    .addOption(new Option('--type <type>', 'only this type').choices(TRANSACTION_TYPES))
    .option(
      '--limit <n>',
      `at most this many (1 to ${PAGE_MAX}; default 50)`,
      wholeNumber('--limit', 1, PAGE_MAX),
    )
    .addOption(
      new Option('--offset <n>', 'skip this many').argParser(
        wholeNumber('--offset', 0, Number.MAX_SAFE_INTEGER),
      ),
    )
    .addOption(new Option('--all', 'every page').conflicts(['offset', 'limit']))
    .addHelpText(
      'after',
      '\nExamples:\n  agentctl data transactions --type deposit_request\n  agentctl --json data transactions 0x000000000000000000000000000000000000dEaD --all',
    )
    .action(
      action(async (context, command) => {
        const address = await userAddress(context, command.processedArgs[0] as string | undefined);
        const options = command.opts<{
          type?: string;
          limit?: number;
          offset?: number;
          all?: boolean;
        }>();
        const client = await context.dataClient();
        const out = await context.output();
        if (options.all) {
          // Every page, gathered into one body of the same shape.
          const all: unknown[] = [];
          let total = 0;
          let first: Record<string, unknown> | undefined;
          for (let offset = 0; offset === 0 || offset < total; offset += PAGE_MAX) {
            const query = { type: options.type, limit: PAGE_MAX, offset };
            const page = out.json
              ? ((await client.data.transactions.asReceived(address, query)).data as {
                  transactions?: unknown[];
                  total?: number;
                })
              : (await client.data.transactions(address, query)).data;
            first ??= page as Record<string, unknown>;
            total = Number(page.total ?? 0);
            const items = page.transactions ?? [];
            all.push(...items);
            if (items.length === 0) break;
          }
          const body = { ...first, transactions: all, total, limit: all.length, offset: 0 };
          if (out.json) return out.jsonValue(body);
          return transactionsTable(out, body as never);
        }
        const query = { type: options.type, limit: options.limit, offset: options.offset };
        if (out.json)
          return out.raw((await client.data.transactions.asReceived(address, query)).text);
        const { data: body } = await client.data.transactions(address, query);
        transactionsTable(out, body);
      }),
    );

  data
    .command('stats')
    .description('protocol totals: TVL, strategies, agents, users, volume')
    .addHelpText('after', '\nExample:\n  agentctl data stats')
    .action(
      action(async (context) => {
        const client = await context.dataClient();
        const out = await context.output();
        if (out.json) return out.raw((await client.data.stats.asReceived()).text);
        const { data: stats } = await client.data.stats();
        out.fields({
          'total tvl': usdc(stats.totalTvl),
          vaults: stats.vaults,
          strategies: `${stats.strategies} (${stats.liveStrategies} live)`,
          agents: stats.agents,
          users: stats.users,
          transactions: stats.transactions,
          'volume 24h': usdc(stats.volume24h),
          block: stats.blockNumber,
          'updated at': stats.updatedAt,
        });
      }),
    );

  data
    .command('nodes')
    .description('the chain nodes: the sandbox’s own, and registered ones')
    .addHelpText('after', '\nExample:\n  agentctl data nodes')
    .action(
      action(async (context) => {
        const client = await context.dataClient();
        const out = await context.output();
        if (out.json) return out.raw((await client.data.nodes.asReceived()).text);
        const { data: body } = await client.data.nodes();
        out.table(
          ['name', 'status', 'block', 'latency ms', 'last seen', 'version', 'operator', 'id'],
          body.nodes.map((node) => [
            node.name,
            node.status,
            node.blockNumber ?? '',
            node.latencyMs ?? '',
            node.lastSeen ?? '',
            node.version ?? '',
            node.operator,
            node.id,
          ]),
        );
      }),
    );
  return data;
}

/** ERC-7540 amounts: deposits in USDC, redemptions in shares; blank when none. */
function requestsText(deposit: string, redeem: string): string {
  const parts: string[] = [];
  if (deposit !== '0') parts.push(`deposit ${usdc(deposit)}`);
  if (redeem !== '0') parts.push(`redeem ${rawWithAmount(redeem, 'shares')}`);
  return parts.join(', ');
}

function transactionsTable(
  out: Awaited<ReturnType<Context['output']>>,
  body: {
    address: string;
    total: number;
    offset: number;
    transactions: Array<{
      timestamp: string;
      type: string;
      status: string;
      amount: string;
      shares: string | null;
      vault: string;
      hash: string;
    }>;
  },
): void {
  if (body.transactions.length === 0) {
    out.print(`no transactions for ${body.address}${body.total > 0 ? ' on this page' : ''}`);
    return;
  }
  out.table(
    ['time', 'type', 'status', 'amount', 'shares', 'vault', 'tx'],
    body.transactions.map((tx) => [
      tx.timestamp,
      tx.type,
      tx.status,
      usdc(tx.amount),
      tx.shares === null ? '' : rawWithAmount(tx.shares),
      tx.vault,
      tx.hash,
    ]),
  );
  const shown = body.transactions.length;
  if (shown < body.total) {
    out.info(
      `${body.offset + 1} to ${body.offset + shown} of ${body.total}; --offset or --all for more`,
    );
  }
}
