import { type Address, getAddress } from 'viem';
import type { z } from 'zod';
import type { VaultId } from '../../api/schemas/index.ts';
import {
  type DataVaultDetail,
  type DataVaultItem,
  HISTORY_INTERVALS,
  HISTORY_MAX_POINTS,
  HISTORY_PERIODS,
  type VaultHistory,
} from '../../api/schemas/index.ts';
import { VAULT_IDS } from '../../api/schemas/values.ts';
import { type Deployment, VAULT_CONFIG } from '../chain/deployment.ts';
import type { Sql } from '../store/sql.ts';
import { type StateRow, toState } from './projection.ts';
import { isoTime, VAULT_STATE_AT_SQL } from './reads.ts';
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

/** The deployment's vaults by lower-case address, in its order: the vaults the index follows. */
export function deploymentVaults(deployment: Deployment): ReadonlyMap<string, VaultId> {
  return new Map(VAULT_IDS.map((id) => [deployment.vaults[id].toLowerCase(), id]));
}

/**
 * Every vault with its state as of a time: VAULT_STATE_AT_SQL's probe per vault, then the
 * state's row by key (no sort, however long the vaults' histories).
 */
export const VAULT_SUMMARIES_SQL = `SELECT v.address, v.created_at, v.fulfillment_delay,
    s.balance, s.reserved, s.total_supply, s.apy_bps, s.last_accrual
  FROM vaults v
  JOIN vault_states s ON s.vault = v.address AND s.block_number = (
    SELECT block_number FROM vault_states
    WHERE vault = v.address AND timestamp <= ?
    ORDER BY timestamp DESC, block_number DESC LIMIT 1)`;

/**
 * Every indexed vault at `now` (the last indexed block's time), in the deployment's order:
 * each vault with its state there, in one statement (VAULT_STATE_AT_SQL's probe, per vault).
 */
export async function vaultSummaries(
  sql: Sql,
  vaults: ReadonlyMap<string, VaultId>,
  now: number,
): Promise<VaultSummary[]> {
  const rows = await sql.all<
    {
      address: string;
      created_at: number | string;
      fulfillment_delay: number | string | null;
    } & StateRow
  >(VAULT_SUMMARIES_SQL, now);
  const known = new Map(rows.map((row) => [row.address, row]));
  const summaries: VaultSummary[] = [];
  for (const [address, id] of vaults) {
    const row = known.get(address);
    if (!row) continue;
    const state = toState(row);
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
  strategies: readonly IndexedStrategy[],
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

/**
 * A vault's rates: now, and the share price's annualised growth over 7 and 30 days and since
 * creation. Its states at those times are read in one statement.
 */
export async function vaultApys(
  sql: Sql,
  vault: VaultSummary,
  now: number,
): Promise<{ current: number; '7d': number; '30d': number; inception: number }> {
  const address = vault.address.toLowerCase();
  const from = (seconds: number | null) =>
    seconds === null ? vault.createdAt : Math.max(vault.createdAt, now - seconds);
  const windows = [now, from(7 * DAY), from(30 * DAY), from(null)];
  // Each branch is VAULT_STATE_AT_SQL, tagged with its window.
  const rows = await sql.all<StateRow & { at_window: number | string }>(
    windows
      .map((_, i) => `SELECT ${i} AS at_window, w${i}.* FROM (${VAULT_STATE_AT_SQL}) w${i}`)
      .join(' UNION ALL '),
    ...windows.flatMap((at) => [address, at]),
  );
  const states = new Map(rows.map((row) => [Number(row.at_window), toState(row)]));
  const current = states.get(0);
  const growthSince = (window: number) => {
    const at = windows[window] as number;
    const then = states.get(window);
    if (!then || !current) return 0;
    return annualisedGrowth(priceAt(then, at), priceAt(current, now), now - at);
  };
  return {
    current: vault.apy,
    '7d': growthSince(1),
    '30d': growthSince(2),
    inception: growthSince(3),
  };
}

/** GET /v1/vaults/:address: the list item's numbers, with APYs over windows and strategies. */
export function vaultDetail(
  vault: VaultSummary,
  asset: Address,
  strategies: readonly IndexedStrategy[],
  apys: Awaited<ReturnType<typeof vaultApys>>,
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
export async function vaultHistory(
  sql: Sql,
  vault: VaultSummary,
  period: keyof typeof HISTORY_PERIODS,
  interval: keyof typeof HISTORY_INTERVALS,
  now: number,
): Promise<z.input<typeof VaultHistory>> {
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
  // The state at the start, then every state after it up to now: two probes of one index.
  const first = await sql.get<StateRow>(VAULT_STATE_AT_SQL, address, start);
  const rows = await sql.all<StateRow>(
    `SELECT block_number, timestamp, balance, reserved, total_supply, apy_bps, last_accrual
       FROM vault_states WHERE vault = ? AND timestamp > ? AND timestamp <= ?
       ORDER BY timestamp, block_number`,
    address,
    start,
    now,
  );
  let state = first && toState(first);
  let next = 0;
  let previous = { at: start, price: state ? priceAt(state, start) : undefined };
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
