import { type Address, getAddress } from 'viem';
import type { z } from 'zod';
import {
  type DataVaultDetail,
  type DataVaultItem,
  HISTORY_INTERVALS,
  HISTORY_MAX_POINTS,
  HISTORY_PERIODS,
  type VaultHistory,
} from '../../api/schemas/index.ts';
import { VAULT_CONFIG } from '../chain/deployment.ts';
import type { Indexer } from './indexer.ts';
import { indexTime, isoTime, type StateRow, toState, vaultStateAt } from './reads.ts';
import { statement } from './statements.ts';
import type { IndexedStrategy } from './strategies.ts';
import {
  annualisedGrowth,
  convertToAssets,
  currentRate,
  priceAt,
  SHARE_UNIT,
  totalAssetsAt,
} from './vault-math.ts';

const DAY = 86_400;

/** Raw USDC units as US dollars (the sandbox's USDC is worth one dollar). */
export function usdOf(raw: bigint): number {
  return Number(raw) / 1e6;
}

export interface VaultSummary {
  address: Address;
  id: string;
  createdAt: number;
  fulfillmentDelay: number | null;
  tvl: bigint;
  totalShares: bigint;
  pricePerShare: bigint;
  apy: number;
  /** The time of the last indexed block, which this state is at (Unix seconds). */
  at: number;
}

/** Every indexed vault at the last indexed block, in the deployment's order. */
export function vaultSummaries(index: Indexer): VaultSummary[] {
  const now = indexTime(index);
  const rows = statement(
    index.db,
    'SELECT address, created_at, fulfillment_delay FROM vaults',
  ).all() as Array<{ address: string; created_at: number; fulfillment_delay: number | null }>;
  const known = new Map(rows.map((row) => [row.address, row]));
  const summaries: VaultSummary[] = [];
  for (const [address, id] of index.vaults) {
    const row = known.get(address);
    const state = row && vaultStateAt(index.db, address, now);
    if (!row || !state) continue;
    const tvl = totalAssetsAt(state, now);
    summaries.push({
      address: getAddress(address),
      id,
      createdAt: Number(row.created_at),
      fulfillmentDelay: row.fulfillment_delay === null ? null : Number(row.fulfillment_delay),
      tvl,
      totalShares: state.totalSupply,
      pricePerShare: convertToAssets(SHARE_UNIT, tvl, state.totalSupply),
      apy: currentRate(state, now),
      at: now,
    });
  }
  return summaries;
}

/** The list item of GET /v1/vaults. */
export function vaultItem(
  vault: VaultSummary,
  strategies: IndexedStrategy[],
): z.input<typeof DataVaultItem> {
  const config = VAULT_CONFIG[vault.id as keyof typeof VAULT_CONFIG];
  return {
    address: vault.address,
    name: config.name,
    symbol: config.symbol,
    tvl: vault.tvl.toString(),
    tvlUsd: usdOf(vault.tvl),
    apy: vault.apy,
    riskLevel: config.riskLevel,
    strategies: strategies.filter((s) => s.vault === vault.address).length,
    isERC7540: config.async,
    fulfillmentDelay: vault.fulfillmentDelay,
    createdAt: isoTime(vault.createdAt),
  };
}

/** The sandbox's vaults charge no fees. */
export const VAULT_FEES = { management: 0, performance: 0, hurdle: 0 } as const;

/** A vault's rates: now, and the share price's annualised growth over 7 and 30 days and since creation. */
export function vaultApys(
  index: Indexer,
  vault: VaultSummary,
): { current: number; '7d': number; '30d': number; inception: number } {
  const now = indexTime(index);
  const address = vault.address.toLowerCase();
  const current = vaultStateAt(index.db, address, now);
  const growthSince = (seconds: number | null) => {
    const from = seconds === null ? vault.createdAt : Math.max(vault.createdAt, now - seconds);
    const then = vaultStateAt(index.db, address, from);
    if (!then || !current) return 0;
    return annualisedGrowth(priceAt(then, from), priceAt(current, now), now - from);
  };
  return {
    current: vault.apy,
    '7d': growthSince(7 * DAY),
    '30d': growthSince(30 * DAY),
    inception: growthSince(null),
  };
}

/** GET /v1/vaults/:address: the list item's numbers, with APYs over windows and strategies. */
export function vaultDetail(
  vault: VaultSummary,
  asset: Address,
  strategies: IndexedStrategy[],
  apys: ReturnType<typeof vaultApys>,
): z.input<typeof DataVaultDetail> {
  const item = vaultItem(vault, strategies);
  return {
    address: item.address,
    name: item.name,
    symbol: item.symbol,
    asset: getAddress(asset),
    tvl: item.tvl,
    tvlUsd: item.tvlUsd,
    totalShares: vault.totalShares.toString(),
    pricePerShare: vault.pricePerShare.toString(),
    apy: apys,
    fees: { ...VAULT_FEES },
    riskLevel: item.riskLevel,
    strategies: strategies
      .filter((s) => s.vault === vault.address)
      .map((s) => ({ id: s.id, name: s.name, allocation: s.allocation, apy: s.performance.apy })),
    isERC7540: item.isERC7540,
    fulfillmentDelay: item.fulfillmentDelay,
    createdAt: item.createdAt,
  };
}

export class TooManyPointsError extends Error {}

/**
 * GET /v1/vaults/:address/history: one point per interval, oldest first, each the state at
 * the end of its interval. Intervals are aligned to the Unix epoch (a day ends at 00:00 UTC);
 * the last point is the current state, at the last indexed block. Points start with the
 * interval the vault was created in. `apy` is the share price's growth over the point's
 * interval (from the previous point, or from creation), annualised.
 */
export function vaultHistory(
  index: Indexer,
  vault: VaultSummary,
  period: keyof typeof HISTORY_PERIODS,
  interval: keyof typeof HISTORY_INTERVALS,
): z.input<typeof VaultHistory> {
  const now = indexTime(index);
  const step = HISTORY_INTERVALS[interval];
  const days = HISTORY_PERIODS[period];
  const start = days === null ? vault.createdAt : Math.max(vault.createdAt, now - days * DAY);
  const times: number[] = [];
  for (let end = (Math.floor(start / step) + 1) * step; end < now; end += step) times.push(end);
  times.push(now);
  if (times.length > HISTORY_MAX_POINTS) {
    throw new TooManyPointsError(
      `period ${period} at interval ${interval} is ${times.length} points, more than ${HISTORY_MAX_POINTS}; choose a longer interval or a shorter period`,
    );
  }
  const address = vault.address.toLowerCase();
  const rows = statement(
    index.db,
    `SELECT block_number, timestamp, balance, reserved, total_supply, apy_bps, last_accrual
       FROM vault_states WHERE vault = ? AND timestamp > ? AND timestamp <= ?
       ORDER BY timestamp, block_number`,
  ).all(address, start, now) as unknown as StateRow[];
  let state = vaultStateAt(index.db, address, start);
  let previous = { at: start, price: state ? priceAt(state, start) : undefined };
  let next = 0;
  const points = times.map((at) => {
    while (next < rows.length && Number(rows[next]?.timestamp) <= at) {
      state = toState(rows[next] as StateRow);
      next++;
    }
    if (!state)
      return { timestamp: isoTime(at), tvl: '0', apy: 0, pricePerShare: SHARE_UNIT.toString() };
    const tvl = totalAssetsAt(state, at);
    const price = priceAt(state, at);
    const apy = previous.price ? annualisedGrowth(previous.price, price, at - previous.at) : 0;
    previous = { at, price };
    return {
      timestamp: isoTime(at),
      tvl: tvl.toString(),
      apy,
      pricePerShare: convertToAssets(SHARE_UNIT, tvl, state.totalSupply).toString(),
    };
  });
  return { address: vault.address, period, interval, points };
}
