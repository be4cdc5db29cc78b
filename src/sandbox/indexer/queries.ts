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
import type { Sql } from '../store/sql.ts';
import { IndexUnavailableError } from './failure.ts';
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
  deploymentVaults,
  usdOf,
  type VaultSummary,
  vaultApys,
  vaultDetail,
  vaultHistory,
  vaultItem,
  vaultSummaries,
} from './vaults.ts';
import type { IndexView } from './view.ts';

/**
 * The data API's answers, one function per question, shared by REST (routes/data.ts) and
 * GraphQL (graphql/resolvers.ts) so that the two never disagree: each answers the REST shape,
 * which GraphQL maps onto its types. Arguments arrive validated; a vault or strategy that is
 * not there is a DataApiError (VAULT_NOT_FOUND, STRATEGY_NOT_FOUND). Every answer is read
 * through the IndexView (view.ts), asynchronously: the writer's own index today, a replica's
 * PostgreSQL tomorrow, with the same SQL.
 */
export function createDataQueries(deps: {
  chain: SandboxChain;
  store: Store;
  /** The index as its readers see it (runtime.ts builds it over the index open now). */
  index: IndexView;
}) {
  const { chain, store, index } = deps;
  const vaults = deploymentVaults(chain.deployment);
  /** When each node key was last used, for the node list (kept in memory). */
  const nodeSeen = new Map<string, number>();
  const now = () => indexTime(index);
  /** `work` on the index's committed rows; an index that cannot answer is INDEX_UNAVAILABLE. */
  const read = <T>(work: (sql: Sql) => Promise<T>): Promise<T> => readIndex(index, work);

  /**
   * Answers that only the index changes, computed once per commit: a read that many clients
   * repeat (every vault with its APYs, say) costs its queries once between two blocks, however
   * many ask at once (the promise is kept, not the value: callers that arrive while it is read
   * share the read). A read that fails is dropped, so the next caller reads again. Kept
   * frozen, since each is handed to every caller until the next commit.
   */
  let memoVersion = -1;
  let memo = new Map<string, Promise<unknown>>();
  function perCommit<T extends object>(key: string, compute: () => Promise<T>): Promise<T> {
    const version = index.version();
    if (version !== memoVersion) {
      memo = new Map();
      memoVersion = version;
    }
    const entries = memo;
    let value = entries.get(key) as Promise<T> | undefined;
    if (value === undefined) {
      const computing = compute().then((answer) => Object.freeze(answer));
      entries.set(key, computing);
      computing.catch(() => {
        if (entries.get(key) === computing) entries.delete(key);
      });
      value = computing;
    }
    return value;
  }
  /**
   * The summaries read last (those of the newest version read so far), for what must answer
   * synchronously: the GraphQL cost of a vault's history needs the vaults' creation times
   * while it validates a document (routes/graphql.ts reads summaries() first).
   */
  let lastSummaries: { version: number; summaries: readonly VaultSummary[] } = {
    version: -1,
    summaries: [],
  };
  const summaries = (): Promise<readonly VaultSummary[]> => {
    const version = index.version();
    return perCommit('summaries', async () => {
      const found = await read((sql) => vaultSummaries(sql, vaults, now()));
      const frozen = found.map((vault) => Object.freeze(vault));
      if (version >= lastSummaries.version) lastSummaries = { version, summaries: frozen };
      return frozen;
    });
  };
  const strategies = (): Promise<readonly IndexedStrategy[]> =>
    perCommit('strategies', async () =>
      (await read((sql) => indexedStrategies(sql, chain.deployment, now()))).map((s) =>
        Object.freeze(s),
      ),
    );

  /**
   * A vault's APYs, once per summary: a summary belongs to one commit, and a lazy reader (a
   * subscription's event built after the next block) must not store its answer under another.
   * The promise is kept (concurrent readers share one read), and dropped if it fails.
   */
  type Apys = Awaited<ReturnType<typeof vaultApys>>;
  const apysOf = new WeakMap<VaultSummary, Promise<Readonly<Apys>>>();
  const apys = (vault: VaultSummary): Promise<Readonly<Apys>> => {
    let found = apysOf.get(vault);
    if (!found) {
      const reading = read((sql) => vaultApys(sql, vault, vault.at)).then((rates) =>
        Object.freeze(rates),
      );
      apysOf.set(vault, reading);
      reading.catch(() => {
        if (apysOf.get(vault) === reading) apysOf.delete(vault);
      });
      found = reading;
    }
    return found;
  };

  /** The vault at `address`, as summaries() has it. */
  async function vaultAt(address: string): Promise<VaultSummary> {
    const found = (await summaries()).find(
      (vault) => vault.address.toLowerCase() === address.toLowerCase(),
    );
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

  return {
    /** Moves whenever any answer may change: the index committed, or an agent row changed. */
    version: () => `${index.version()}:${store.agents.version()}`,
    /** A node key was used (its node is online for a while). */
    // In sandbox time, as every other time the data API answers.
    nodeSeen: (nodeId: string) => nodeSeen.set(nodeId, chain.nowSeconds() * 1000),
    /** After a restore: what was seen since may be ahead of the restored clock. */
    forgetNodesSeen: () => nodeSeen.clear(),
    summaries,
    /** The summaries read last, synchronously (see lastSummaries); empty before any read. */
    lastSummaries: (): readonly VaultSummary[] => lastSummaries.summaries,
    strategies,
    vaultAt,

    async vaults(query: {
      riskLevel?: string | undefined;
      minTvl?: string | undefined;
      orderBy?: string | undefined;
    }): Promise<z.input<typeof DataVaultList> & { summaries: VaultSummary[] }> {
      const [all, vaultList] = await Promise.all([strategies(), summaries()]);
      const totalTvl = vaultList.reduce((sum, vault) => sum + vault.tvl, 0n);
      const min = query.minTvl === undefined ? 0n : BigInt(query.minTvl);
      let items = vaultList
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
      const found = (await strategies()).find((s) => s.id === strategyId.toLowerCase());
      return found && strategyItem(found, nameIn(names)(found.owner));
    },

    apys,
    /**
     * When a user first did anything in each vault (Unix seconds), by the vault's lower-case
     * address: one read for all of a user's positions.
     */
    firstActivityAt: (user: string) => read((sql) => firstActivityAt(sql, user)),
    /** The transactions with these index keys (what a commit recorded). */
    transactionsAt: (keys: ReadonlyArray<{ blockNumber: number; logIndex: number }>) =>
      read((sql) => transactionsAt(sql, keys)),

    async vault(address: string): Promise<z.input<typeof DataVaultDetail>> {
      const [vault, all] = await Promise.all([vaultAt(address), strategies()]);
      return vaultDetail(vault, chain.deployment.usdc, all, await apys(vault));
    },

    async history(
      address: string,
      period: keyof typeof HISTORY_PERIODS,
      interval: keyof typeof HISTORY_INTERVALS,
    ): Promise<z.input<typeof VaultHistory>> {
      const vault = await vaultAt(address);
      return read((sql) => vaultHistory(sql, vault, period, interval, vault.at));
    },

    async strategyList(query: {
      status?: string | undefined;
      minSharpe?: number | undefined;
    }): Promise<z.input<typeof DataStrategyList>> {
      const agentName = nameIn((await agentDirectory()).names);
      return {
        strategies: (await strategies())
          .filter((s) => s.status !== 'deprecated')
          .filter((s) => query.status === undefined || s.status === query.status)
          .filter(
            (s) => query.minSharpe === undefined || s.performance.sharpeRatio >= query.minSharpe,
          )
          .map((s) => strategyItem(s, agentName(s.owner))),
      };
    },

    async strategyPerformance(strategyId: string): Promise<z.input<typeof StrategyPerformance>> {
      const id = strategyId.toLowerCase();
      const found = (await strategies()).find((s) => s.id === id);
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

    /** The node list is measured live: nothing of it comes from the index. */
    async nodes(): Promise<z.input<typeof DataNodeList>> {
      return { nodes: await nodeList(chain, store, nodeSeen) };
    },

    async stats(): Promise<z.input<typeof ProtocolStats>> {
      // The agent count is the store's: it moves without a commit.
      const { version, count } = await agentDirectory();
      return perCommit(`stats:${version}`, async () => {
        const [vaultList, all] = await Promise.all([summaries(), strategies()]);
        const at = index.checkpoint() ?? { number: 0, timestamp: 0 };
        return read((sql) => protocolStats(sql, at, count, vaultList, all));
      });
    },

    async transactions(
      address: string,
      page: { type?: string | undefined; limit: number; offset: number },
    ): Promise<z.input<typeof UserTransactions>> {
      const found = await read((sql) => userTransactions(sql, address, page));
      return { address: getAddress(address), ...found, limit: page.limit, offset: page.offset };
    },

    async positions(address: string): Promise<z.input<typeof UserPositions>> {
      const at = now();
      const positions = await read((sql) => userPositions(sql, vaults, at, address));
      return { address: getAddress(address), positions };
    },
  };
}

/**
 * `work` as a read of the index: while index.db has failed (and is rebuilt) it throws
 * INDEX_UNAVAILABLE, never an answer read from a damaged file or one that misses the writes
 * since.
 */
async function readIndex<T>(index: IndexView, work: (sql: Sql) => Promise<T>): Promise<T> {
  try {
    return await index.read(work);
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
