import { Command, Option } from 'commander';
import type { ApiClient } from '../../../api/client.ts';
import { action } from '../../action.ts';
import { wholeNumber } from '../../args.ts';
import type { Context } from '../../context.ts';
import { rawToDecimal, rawWithAmount, wideOption } from '../../format.ts';
import type { Output } from '../../output.ts';
import { showRead } from '../../read.ts';
import { timeCell, timeText, usdc, usdcShort, userAddress, vaultNamer } from './shared.ts';

const TRANSACTION_TYPES = ['deposit', 'withdraw', 'deposit_request', 'redeem_request', 'claim'];
/** The data API's largest page: --all asks for pages of this size. */
export const PAGE_MAX = 100;

export interface DataTransactionsOptions {
  /** The wallet; default the profile's agent wallet. */
  address?: string;
  type?: string;
  limit?: number;
  offset?: number;
  /** Every page (not with limit or offset). */
  all?: boolean;
  wide?: boolean;
}

export function transactionsCommand(): Command {
  return new Command('transactions')
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
    .addOption(wideOption())
    .addHelpText(
      'after',
      '\nExamples:\n  agentctl data transactions --type deposit_request\n  agentctl --json data transactions --all \\\n    0x000000000000000000000000000000000000dEaD',
    )
    .action(
      action((context, command) =>
        run(
          { ...command.opts(), address: command.processedArgs[0] as string | undefined },
          context,
        ),
      ),
    );
}

/** A page as the table needs it (the contract's shape, or --json's body as received). */
interface Page {
  address: string;
  total: number;
  offset: number;
  transactions: Transaction[];
}
type Transaction = Awaited<
  ReturnType<ApiClient['data']['transactions']>
>['data']['transactions'][number];

export async function run(options: DataTransactionsOptions, context: Context): Promise<void> {
  const address = await userAddress(context, options.address);
  const client = await context.dataClient();
  const out = await context.output();
  if (options.all) {
    const body = await everyPage(client, address, options.type, out.json);
    if (out.json) return out.jsonValue(body);
    return table(out, body as unknown as Page, options, context);
  }
  const query = { type: options.type, limit: options.limit, offset: options.offset };
  await showRead(out, client.data.transactions, [address, query], (body) =>
    table(out, body, options, context),
  );
}

/** How many times --all goes back for transactions that arrived while it was paging. */
const CATCH_UP_ROUNDS = 3;

/**
 * Every page, gathered into one body of the same shape: the first page's fields (unknown ones
 * too, with --json), every transaction once, the last page's total, `limit` the number
 * gathered and `offset` 0. With `asReceived`, the pages are taken as sent, not checked.
 *
 * Pages are newest first, so a transaction that arrives while paging pushes the rest down a
 * place: the next page would repeat one, and the newcomer would be missed. Each transaction is
 * kept once (by hash, log index and type), and the newcomers are fetched from the top again
 * until the count matches the total (a few rounds at most, under a steady stream).
 */
export async function everyPage(
  client: ApiClient,
  address: string,
  type: string | undefined,
  asReceived: boolean,
): Promise<Record<string, unknown> & { transactions: unknown[]; total: number }> {
  let first: Record<string, unknown> | undefined;
  let total = 0;
  const seen = new Set<string>();
  /** One page: the transactions not gathered yet, and how many the page held. */
  const page = async (offset: number) => {
    const query = { type, limit: PAGE_MAX, offset };
    const body = (
      asReceived
        ? (await client.data.transactions.asReceived(address, query)).data
        : (await client.data.transactions(address, query)).data
    ) as { transactions?: unknown[]; total?: number };
    first ??= body as Record<string, unknown>;
    total = Number(body.total ?? 0);
    const items = body.transactions ?? [];
    const fresh = items.filter((tx) => {
      const { hash, logIndex, type } = (tx ?? {}) as Record<string, unknown>;
      const key = `${hash}:${logIndex}:${type}`;
      if (seen.has(key)) return false;
      seen.add(key);
      return true;
    });
    return { fresh, held: items.length };
  };
  const all: unknown[] = [];
  for (let offset = 0; offset === 0 || offset < total; offset += PAGE_MAX) {
    const { fresh, held } = await page(offset);
    all.push(...fresh);
    if (held === 0) break;
  }
  for (let round = 0; round < CATCH_UP_ROUNDS && all.length < total; round++) {
    // Newcomers are at the top: read down until a page holds one already gathered.
    const newcomers: unknown[] = [];
    for (let offset = 0; ; offset += PAGE_MAX) {
      const { fresh, held } = await page(offset);
      newcomers.push(...fresh);
      if (fresh.length < held || held < PAGE_MAX) break;
    }
    if (newcomers.length === 0) break;
    all.unshift(...newcomers);
  }
  return { ...first, transactions: all, total, limit: all.length, offset: 0 };
}

async function table(
  out: Output,
  body: Page,
  options: DataTransactionsOptions,
  context: Context,
): Promise<void> {
  if (body.transactions.length === 0) {
    out.print(`no transactions for ${body.address}${body.total > 0 ? ' on this page' : ''}`);
    return;
  }
  const now = context.nowMs();
  if (options.wide) {
    out.table(
      ['time', 'type', 'status', 'amount', 'shares', 'vault', 'block', 'tx'],
      body.transactions.map((tx) => [
        timeText(tx.timestamp, now),
        tx.type,
        tx.status,
        usdc(tx.amount),
        tx.shares === null ? '' : rawWithAmount(tx.shares, 'shares'),
        tx.vault,
        tx.blockNumber,
        tx.hash,
      ]),
    );
  } else {
    // Four columns fit 80: the status under the type, the shares under the amount, the
    // vault by its id; --wide gives the hash, the block and every value whole.
    const vaultName = await vaultNamer(context);
    out.table(
      ['time', 'type\nstatus', 'amount\nshares', 'vault'],
      body.transactions.map((tx) => [
        timeCell(tx.timestamp, now),
        `${tx.type}\n${tx.status}`,
        tx.shares === null
          ? usdcShort(tx.amount)
          : `${usdcShort(tx.amount)}\n${rawToDecimal(tx.shares)} shares`,
        vaultName(tx.vault),
      ]),
    );
  }
  const shown = body.transactions.length;
  if (shown < body.total) {
    out.info(
      `${body.offset + 1} to ${body.offset + shown} of ${body.total}; --offset or --all for more`,
    );
  }
}
