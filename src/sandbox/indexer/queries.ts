import { getAddress } from 'viem';
import type { z } from 'zod';
import type {
  DataNodeList,
  DataStrategy,
  DataStrategyList,
  DataVaultDetail,
  DataVaultList,
  HISTORY_INTERVALS,
  HISTORY_PERIODS,
  ProtocolStats,
  StrategyPerformance,
  UserPositions,
  UserTransactions,
  VaultHistory,
} from '../../api/schemas/index.ts';
import type { SandboxChain } from '../chain/index.ts';
import { DataApiError } from '../errors.ts';
import type { Store } from '../store/index.ts';
import { IndexUnavailableError } from './failure.ts';
import type { Indexer } from './indexer.ts';
import { nodeList } from './nodes.ts';
import {
  firstActivityAt,
  indexTime,
  isoTime,
  transactionsAt,
  userPositions,
  userTransactions,
} from './reads.ts';
import { protocolStats } from './stats.ts';
import { type IndexedStrategy, indexedStrategies } from './strategies.ts';
import {
  usdOf,
  type VaultSummary,
  vaultApys,
  vaultDetail,
  vaultHistory,
  vaultItem,
  vaultSummaries,
} from './vaults.ts';

/**
 * The data API's answers, one function per question, shared by REST (routes/data.ts) and
 * GraphQL (graphql/resolvers.ts) so that the two never disagree: each answers the REST shape,
 * which GraphQL maps onto its types. Arguments arrive validated; a vault or strategy that is
 * not there is a DataApiError (VAULT_NOT_FOUND, STRATEGY_NOT_FOUND).
 */
export function createDataQueries(deps: {
  chain: SandboxChain;
  store: Store;
  /** The index open now (runtime.ts holds it, and may replace it). */
  index: () => Indexer;
}) {
  const { chain, store, index } = deps;
  /** When each node key was last used, for the node list (kept in memory). */
  const nodeSeen = new Map<string, number>();
  const now = () => indexTime(index());

  /**
   * Answers that only the index changes, computed once per commit: a read that many clients
   * repeat (every vault with its APYs, say) costs its queries once between two blocks. Kept
   * frozen, since each is handed to every caller until the next commit.
   */
  let memoVersion = -1;
  let memo = new Map<string, unknown>();
  function perCommit<T extends object>(key: string, compute: () => T): T {
    if (index().version() !== memoVersion) {
      memo = new Map();
      memoVersion = index().version();
    }
    let value = memo.get(key) as T | undefined;
    if (value === undefined) {
      value = Object.freeze(compute());
      memo.set(key, value);
    }
    return value;
  }
  const summaries = (): VaultSummary[] =>
    perCommit('summaries', () => vaultSummaries(index()).map((vault) => Object.freeze(vault)));
  const strategies = (): IndexedStrategy[] =>
    perCommit('strategies', () =>
      indexedStrategies(index().db, chain.deployment, now()).map((s) => Object.freeze(s)),
    );

  /**
   * A vault's APYs, once per summary: a summary belongs to one commit, and a lazy reader (a
   * subscription's event built after the next block) must not store its answer under another.
   */
  const apysOf = new WeakMap<VaultSummary, ReturnType<typeof vaultApys>>();
  const apys = (vault: VaultSummary) => {
    let found = apysOf.get(vault);
    if (!found) {
      found = Object.freeze(vaultApys(index(), vault));
      apysOf.set(vault, found);
    }
    return found;
  };

  function vaultAt(address: string, vaults = summaries()): VaultSummary {
    const found = vaults.find((vault) => vault.address.toLowerCase() === address.toLowerCase());
    if (!found) {
      throw new DataApiError('VAULT_NOT_FOUND', `no vault at ${getAddress(address)}`, {
        address: getAddress(address),
      });
    }
    return found;
  }

  /**
   * The agents' names by their server-side wallets (as stored), and how many agents there
   * are: read from the store before an answer reads the index, again only once an agent row
   * changed (the answers that need them are cached per version anyway).
   */
  let directory: { version: number; names: Map<string, string>; count: number } | undefined;
  async function agentDirectory() {
    const version = store.agents.version();
    if (directory?.version !== version) {
      const rows = await store.agents.names();
      directory = {
        version,
        names: new Map(rows.map((row) => [row.agent_address, row.agent_name])),
        count: rows.length,
      };
    }
    return directory;
  }
  /** An agent's name by its wallet, or null. */
  const nameIn = (names: Map<string, string>) => (owner: string) => names.get(owner) || null;

  const answers = {
    /** Moves whenever any answer may change: the index committed, or an agent row changed. */
    version: () => `${index().version()}:${store.agents.version()}`,
    /** A node key was used (its node is online for a while). */
    // In sandbox time, as every other time the data API answers.
    nodeSeen: (nodeId: string) => nodeSeen.set(nodeId, chain.nowSeconds() * 1000),
    /** After a restore: what was seen since may be ahead of the restored clock. */
    forgetNodesSeen: () => nodeSeen.clear(),
    summaries,
    strategies,
    vaultAt,

    vaults(query: {
      riskLevel?: string | undefined;
      minTvl?: string | undefined;
      orderBy?: string | undefined;
    }): z.input<typeof DataVaultList> & { summaries: VaultSummary[] } {
      const all = strategies();
      const vaults = summaries();
      const totalTvl = vaults.reduce((sum, vault) => sum + vault.tvl, 0n);
      const min = query.minTvl === undefined ? 0n : BigInt(query.minTvl);
      let items = vaults
        .filter((vault) => vault.tvl >= min)
        .map((vault) => ({ vault, item: vaultItem(vault, all) }))
        .filter(({ item }) => query.riskLevel === undefined || item.riskLevel === query.riskLevel);
      if (query.orderBy) items = sortVaults(items, query.orderBy);
      return {
        vaults: items.map(({ item }) => item),
        totalTvl: totalTvl.toString(),
        totalTvlUsd: usdOf(totalTvl),
        summaries: items.map(({ vault }) => vault),
      };
    },

    /** One strategy as /v1/strategies lists it (deprecated ones too); undefined if none. */
    async strategy(strategyId: string): Promise<z.input<typeof DataStrategy> | undefined> {
      const { names } = await agentDirectory();
      return readIndex(index, () => {
        const found = strategies().find((s) => s.id === strategyId.toLowerCase());
        return found && strategyItem(found, nameIn(names)(found.owner));
      });
    },

    apys,
    /** When a user first did anything in a vault (Unix seconds), or undefined. */
    firstActivityAt: (user: string, vault: string) => firstActivityAt(index().db, user, vault),
    /** The transactions with these index keys (what a commit recorded). */
    transactionsAt: (keys: Array<{ blockNumber: number; logIndex: number }>) =>
      transactionsAt(index().db, keys),

    vault(address: string, all = strategies()): z.input<typeof DataVaultDetail> {
      const vault = vaultAt(address);
      return vaultDetail(vault, chain.deployment.usdc, all, apys(vault));
    },

    /** A vault's detail from a summary already read (GraphQL's lists). */
    history(
      address: string,
      period: keyof typeof HISTORY_PERIODS,
      interval: keyof typeof HISTORY_INTERVALS,
    ): z.input<typeof VaultHistory> {
      return vaultHistory(index(), vaultAt(address), period, interval);
    },

    async strategyList(query: {
      status?: string | undefined;
      minSharpe?: number | undefined;
    }): Promise<z.input<typeof DataStrategyList>> {
      const agentName = nameIn((await agentDirectory()).names);
      return readIndex(index, () => ({
        strategies: strategies()
          .filter((s) => s.status !== 'deprecated')
          .filter((s) => query.status === undefined || s.status === query.status)
          .filter(
            (s) => query.minSharpe === undefined || s.performance.sharpeRatio >= query.minSharpe,
          )
          .map((s) => strategyItem(s, agentName(s.owner))),
      }));
    },

    strategyPerformance(strategyId: string): z.input<typeof StrategyPerformance> {
      const id = strategyId.toLowerCase();
      const found = strategies().find((s) => s.id === id);
      if (!found) throw new DataApiError('STRATEGY_NOT_FOUND', `no strategy ${id}`, { id });
      return {
        id: found.id,
        name: found.name,
        status: found.status,
        apy: found.performance.apy,
        sharpeRatio: found.performance.sharpeRatio,
        maxDrawdown: found.performance.maxDrawdown,
        returns: found.performance.returns.map((r) => ({
          timestamp: isoTime(r.timestamp),
          value: r.value,
        })),
      };
    },

    async nodes(): Promise<z.input<typeof DataNodeList>> {
      return { nodes: await nodeList(chain, store, nodeSeen) };
    },

    async stats(): Promise<z.input<typeof ProtocolStats>> {
      // The agent count is the store's: it moves without a commit.
      const { version, count } = await agentDirectory();
      return readIndex(index, () =>
        perCommit(`stats:${version}`, () =>
          protocolStats(index(), count, summaries(), strategies()),
        ),
      );
    },

    transactions(
      address: string,
      page: { type?: string | undefined; limit: number; offset: number },
    ): z.input<typeof UserTransactions> {
      const found = userTransactions(index().db, address, page);
      return { address: getAddress(address), ...found, limit: page.limit, offset: page.offset };
    },

    positions(address: string): z.input<typeof UserPositions> {
      return { address: getAddress(address), positions: userPositions(index(), address) };
    },
  };
  // The node list is measured live; the rest comes from the index.
  // The node list is measured live; those that read the store first read the index themselves.
  return readingIndex(answers, index, [
    'version',
    'nodeSeen',
    'forgetNodesSeen',
    'nodes',
    'strategy',
    'strategyList',
    'stats',
  ]);
}

/**
 * `answers` with each function but those named in `apart` run as a read of the index: while
 * index.db has failed (and is rebuilt) each throws INDEX_UNAVAILABLE, never an answer read
 * from a damaged file or one that misses the writes since.
 */
function readingIndex<T extends object>(
  answers: T,
  index: () => Indexer,
  apart: Array<keyof T>,
): T {
  const reading = { ...answers } as Record<string, unknown>;
  for (const [key, value] of Object.entries(answers)) {
    if (typeof value !== 'function' || apart.includes(key as keyof T)) continue;
    reading[key] = (...args: unknown[]) => readIndex(index, () => value(...args));
  }
  return reading as T;
}

/** `work` as a read of the index (see readingIndex). */
function readIndex<T>(index: () => Indexer, work: () => T): T {
  try {
    return index().read(work);
  } catch (error) {
    if (!(error instanceof IndexUnavailableError)) throw error;
    throw new DataApiError('INDEX_UNAVAILABLE', error.message);
  }
}
export type DataQueries = ReturnType<typeof createDataQueries>;

/** A strategy as /v1/strategies lists it. */
export function strategyItem(
  s: IndexedStrategy,
  agentName: string | null,
): z.input<typeof DataStrategy> {
  return {
    id: s.id,
    name: s.name,
    agentName,
    vault: s.vault,
    status: s.status,
    allocation: s.allocation,
    apy: s.performance.apy,
    riskScore: s.performance.riskScore,
    sharpeRatio: s.performance.sharpeRatio,
    maxDrawdown: s.performance.maxDrawdown,
  };
}

function sortVaults<T extends { vault: VaultSummary }>(items: T[], orderBy: string): T[] {
  const [field, direction] = orderBy.startsWith('created_at')
    ? ['created_at', orderBy.slice('created_at_'.length)]
    : (orderBy.split('_') as [string, string]);
  const sign = direction === 'asc' ? 1 : -1;
  const key = (vault: VaultSummary) =>
    field === 'tvl' ? Number(vault.tvl) : field === 'apy' ? vault.apy : vault.createdAt;
  // Stable: ties keep the deployment's order.
  return [...items].sort((a, b) => sign * (key(a.vault) - key(b.vault)));
}
