import { Kind, print, type ValueNode } from 'graphql';
import type { IResolvers } from 'mercurius';
import type { z } from 'zod';
import {
  DataAddress,
  type DataTransaction,
  GRAPHQL_INTERVALS,
  GRAPHQL_PERIODS,
  StrategyParams,
  TransactionsQuery,
  upper,
} from '../../api/schemas/index.ts';
import { VAULT_CONFIG } from '../chain/deployment.ts';
import { type DataQueries, strategyItem } from '../indexer/queries.ts';
import { isoTime } from '../indexer/reads.ts';
import type { IndexedStrategy } from '../indexer/strategies.ts';
import { VAULT_FEES, type VaultSummary, vaultItem } from '../indexer/vaults.ts';
import { fromQueryError, graphqlError } from './errors.ts';
import { type TopicStream, topicStream } from './live.ts';

/**
 * The GraphQL resolvers. Every answer comes from the same functions as /v1's
 * (indexer/queries.ts), mapped onto the spec's types: enums in upper case, APY windows as
 * day7/day30, a position's or transaction's vault as a whole Vault. Nested vaults and
 * strategies come from the index's per-commit reads, grouped once per commit: a list of
 * vaults with their strategies, or of transactions with their vaults, reads the index a fixed
 * number of times, over HTTP and for every subscription group alike.
 */

/** A Vault as resolvers hand it on: its fields, with the APY windows read on first use. */
export interface VaultRoot {
  address: string;
  name: string;
  symbol: string;
  tvl: string;
  tvlUsd: number;
  totalShares: string;
  pricePerShare: string;
  apy: () => Promise<{ current: number; day7: number; day30: number; inception: number }>;
  fees: typeof VAULT_FEES;
  riskLevel: string;
  isERC7540: boolean;
  fulfillmentDelay: number | null;
  createdAt: string;
  updatedAt: string;
}

export function vaultRoot(summary: VaultSummary, queries: DataQueries): VaultRoot {
  const item = vaultItem(summary, []);
  let apy: ReturnType<VaultRoot['apy']> | undefined;
  return {
    address: item.address,
    name: item.name,
    symbol: item.symbol,
    tvl: item.tvl,
    tvlUsd: item.tvlUsd,
    totalShares: summary.totalShares.toString(),
    pricePerShare: summary.pricePerShare.toString(),
    // Shared by every subscriber of one event: read once (queries.apys keeps the read per
    // summary, and drops one that failed, as this does).
    apy: () => {
      if (!apy) {
        const reading = queries.apys(summary).then((rates) => ({
          current: rates.current,
          day7: rates['7d'],
          day30: rates['30d'],
          inception: rates.inception,
        }));
        apy = reading;
        reading.catch(() => {
          if (apy === reading) apy = undefined;
        });
      }
      return apy;
    },
    fees: VAULT_FEES,
    riskLevel: upper(VAULT_CONFIG[summary.id as keyof typeof VAULT_CONFIG].riskLevel),
    isERC7540: item.isERC7540,
    fulfillmentDelay: item.fulfillmentDelay,
    createdAt: item.createdAt,
    updatedAt: isoTime(summary.at),
  };
}

/** A Transaction as resolvers hand it on; `vault` (an address) is resolved by a loader. */
export function transactionRoot(item: z.input<typeof DataTransaction>) {
  return {
    hash: item.hash,
    type: upper(item.type),
    vault: item.vault,
    user: item.user,
    amount: item.amount,
    shares: item.shares,
    status: upper(item.status),
    timestamp: item.timestamp,
  };
}

/** Runs a resolver, with the shared queries' errors in GraphQL's terms. */
async function answer<T>(work: () => T | Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (error) {
    throw fromQueryError(error);
  }
}

/** An address argument: 0x and 40 hex digits, any case. */
function address(name: string, value: unknown): string {
  const parsed = DataAddress.safeParse(value);
  if (!parsed.success) {
    throw graphqlError(
      'BAD_USER_INPUT',
      `${name}: ${JSON.stringify(value)} is not an address; it ${parsed.error.issues[0]?.message}`,
      { argument: name },
    );
  }
  return parsed.data;
}

const lower = (value: unknown) => (typeof value === 'string' ? value.toLowerCase() : undefined);

/** BigInt: an integer of any size; out as a decimal string, in as a string or an integer. */
const BIGINT_TEXT = /^-?\d{1,78}$/;
function toBigIntText(value: unknown): string {
  if (typeof value === 'bigint') return value.toString();
  if (typeof value === 'number' && Number.isSafeInteger(value)) return String(value);
  if (typeof value === 'string' && BIGINT_TEXT.test(value)) return BigInt(value).toString();
  // A plain error: graphql-js adds where the value is, and it is answered as BAD_USER_INPUT.
  throw new TypeError(
    `BigInt must be an integer, as a decimal string or a safe integer; got ${JSON.stringify(value)}`,
  );
}

/** DateTime: ISO 8601 in UTC. */
function toDateTime(value: unknown): string {
  if (typeof value === 'string') {
    const at = Date.parse(value);
    if (!Number.isNaN(at) && /^\d{4}-\d\d-\d\dT/.test(value)) return isoTime(at / 1000);
  }
  throw new TypeError(
    `DateTime must be ISO 8601, such as 2026-11-22T10:00:00Z; got ${JSON.stringify(value)}`,
  );
}

/** A literal of a scalar that is written as a string (or, for BigInt, an integer) alone. */
function notLiteral(type: 'BigInt' | 'DateTime', node: ValueNode): TypeError {
  const as = type === 'BigInt' ? 'an integer or a decimal string' : 'a string';
  return new TypeError(`${type} must be written as ${as}; got ${print(node)}`);
}

export function createResolvers(queries: DataQueries): IResolvers {
  const nested = createNestedReads(queries);
  return {
    BigInt: {
      serialize: toBigIntText,
      parseValue: toBigIntText,
      parseLiteral: (node: ValueNode) => {
        if (node.kind === Kind.INT || node.kind === Kind.STRING) return toBigIntText(node.value);
        throw notLiteral('BigInt', node);
      },
    } as never,
    DateTime: {
      serialize: (value: unknown) =>
        typeof value === 'number' ? isoTime(value) : toDateTime(value),
      parseValue: toDateTime,
      parseLiteral: (node: ValueNode) => {
        if (node.kind === Kind.STRING) return toDateTime(node.value);
        throw notLiteral('DateTime', node);
      },
    } as never,

    Query: {
      vaults: (_root, args: { riskLevel?: string; minTvl?: string; orderBy?: string }) =>
        answer(async () => {
          if (args.minTvl?.startsWith('-')) {
            throw graphqlError('BAD_USER_INPUT', 'minTvl must not be negative');
          }
          const { summaries } = await queries.vaults({
            riskLevel: lower(args.riskLevel),
            minTvl: args.minTvl ?? undefined,
            orderBy: lower(args.orderBy),
          });
          return summaries.map((summary) => vaultRoot(summary, queries));
        }),

      vault: (_root, args: { address: string }) =>
        answer(async () =>
          vaultRoot(await queries.vaultAt(address('address', args.address)), queries),
        ),

      vaultHistory: (_root, args: { address: string; period: string; interval: string }) =>
        answer(async () => {
          const period = GRAPHQL_PERIODS[args.period];
          const interval = GRAPHQL_INTERVALS[args.interval];
          if (!period || !interval)
            throw graphqlError('BAD_USER_INPUT', 'unknown period or interval');
          return (await queries.history(address('address', args.address), period, interval)).points;
        }),

      strategies: (_root, args: { status?: string; minSharpe?: number }) =>
        answer(async () =>
          (
            await queries.strategyList({
              status: lower(args.status),
              minSharpe: args.minSharpe ?? undefined,
            })
          ).strategies.map((s) => ({ ...s, status: upper(s.status) })),
        ),

      strategy: (_root, args: { id: string }) =>
        answer(async () => {
          if (!StrategyParams.safeParse({ id: args.id }).success) {
            throw graphqlError(
              'BAD_USER_INPUT',
              `id: ${JSON.stringify(args.id)} is not a strategy id (0x followed by 64 hex digits)`,
              { argument: 'id' },
            );
          }
          const found = await queries.strategy(args.id);
          if (!found) throw graphqlError('NOT_FOUND', `no strategy ${args.id.toLowerCase()}`);
          return { ...found, status: upper(found.status) };
        }),

      userPositions: (_root, args: { address: string }) =>
        answer(async () => {
          const user = address('address', args.address);
          const { positions } = await queries.positions(user);
          // Non-null in the spec: a position that is only a pending request dates from it
          // (read once for all of them, and only if one needs it).
          const firstActivity = positions.some((position) => position.depositedAt === null)
            ? await queries.firstActivityAt(user)
            : new Map<string, number>();
          return positions.map((position) => ({
            vault: position.vault,
            shares: position.shares,
            value: position.value,
            pnl: position.pnl,
            pnlPercent: position.pnlPercent,
            depositedAt:
              position.depositedAt ?? isoTime(firstActivity.get(position.vault.toLowerCase()) ?? 0),
          }));
        }),

      userTransactions: (
        _root,
        args: { address: string; type?: string; limit?: number; offset?: number },
      ) =>
        answer(async () => {
          const user = address('address', args.address);
          const page = TransactionsQuery.safeParse({
            type: lower(args.type),
            limit: args.limit ?? undefined,
            offset: args.offset ?? undefined,
          });
          if (!page.success) {
            const issue = page.error.issues[0];
            throw graphqlError('BAD_USER_INPUT', issue?.message ?? 'invalid arguments', {
              argument: String(issue?.path[0] ?? ''),
            });
          }
          return (await queries.transactions(user, page.data)).transactions.map(transactionRoot);
        }),

      protocolStats: () => answer(() => queries.stats()),

      nodeStats: () =>
        answer(async () => {
          const { nodes } = await queries.nodes();
          const online = nodes.filter((node) => node.status === 'online').length;
          const blocks = nodes.flatMap((node) =>
            node.blockNumber === null ? [] : [node.blockNumber],
          );
          return {
            total: nodes.length,
            online,
            offline: nodes.length - online,
            latestBlock: blocks.length > 0 ? Math.max(...blocks) : null,
            nodes: nodes.map((node) => ({ ...node, status: upper(node.status) })),
          };
        }),
    },

    Vault: { strategies: (vault: VaultRoot) => nested.strategiesOf(vault.address) },
    Transaction: { vault: (item: { vault: string }) => nested.vaultAt(item.vault) },
    UserPosition: { vault: (item: { vault: string }) => nested.vaultAt(item.vault) },
  } as IResolvers;
}

/**
 * The subscribe resolver of the Subscription fields: each names the topic its events are
 * published on, which the hub (live.ts) delivers. Given to graphql-js's
 * createSourceEventStream by socket.ts (mercurius runs no subscriptions here).
 */
export function createSubscribeResolver(queries: DataQueries) {
  const subscribers: Record<string, (args: Record<string, unknown>) => Promise<TopicStream>> = {
    vaultUpdated: async (args) => {
      const vault = await queries.vaultAt(address('address', args.address));
      return topicStream(`vault:${vault.address.toLowerCase()}`);
    },
    transactionCreated: async (args) => {
      if (args.vaultAddress === undefined || args.vaultAddress === null) {
        return topicStream('transactions:*');
      }
      const vault = await queries.vaultAt(address('vaultAddress', args.vaultAddress));
      return topicStream(`transactions:${vault.address.toLowerCase()}`);
    },
  };
  return (
    _root: unknown,
    args: Record<string, unknown>,
    _context: unknown,
    info: { fieldName: string },
  ) =>
    answer(() => {
      const subscribe = subscribers[info.fieldName];
      if (!subscribe)
        throw graphqlError('BAD_USER_INPUT', `${info.fieldName} is not a subscription`);
      return subscribe(args);
    });
}

/**
 * A vault's strategies and the vault at an address, grouped once per index commit: the
 * queries' reads are per commit already (the same arrays until the next), so the grouping is
 * keyed by them.
 */
function createNestedReads(queries: DataQueries) {
  const strategiesByVault = new WeakMap<readonly IndexedStrategy[], Map<string, unknown[]>>();
  const vaultsByAddress = new WeakMap<readonly VaultSummary[], Map<string, VaultRoot>>();
  return {
    /** The vault detail's strategies: the live ones in the vault (no agent names needed). */
    async strategiesOf(vault: string): Promise<unknown[]> {
      const all = await queries.strategies();
      let byVault = strategiesByVault.get(all);
      if (!byVault) {
        byVault = new Map();
        for (const s of all) {
          if (!s.vault) continue;
          const list = byVault.get(s.vault) ?? [];
          list.push({ ...strategyItem(s, null), status: upper(s.status) });
          byVault.set(s.vault, list);
        }
        strategiesByVault.set(all, byVault);
      }
      return byVault.get(vault) ?? [];
    },
    async vaultAt(address: string): Promise<VaultRoot | null> {
      const all = await queries.summaries();
      let byAddress = vaultsByAddress.get(all);
      if (!byAddress) {
        byAddress = new Map(
          all.map((summary) => [summary.address.toLowerCase(), vaultRoot(summary, queries)]),
        );
        vaultsByAddress.set(all, byAddress);
      }
      return byAddress.get(address.toLowerCase()) ?? null;
    },
  };
}
