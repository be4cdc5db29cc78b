import { type Address, getAddress } from 'viem';
import type { DATA_STRATEGY_STATUSES } from '../../api/schemas/index.ts';
import { VAULT_IDS } from '../../api/schemas/values.ts';
import type { Deployment } from '../chain/deployment.ts';
import type { Sql } from '../store/sql.ts';
import { type Performance, simulatePerformance } from './strategy-sim.ts';

export type DataStrategyStatus = (typeof DATA_STRATEGY_STATUSES)[number];

/** Part A's lifecycle onto the spec's StrategyStatus. */
export const STATUS_MAP: Record<string, DataStrategyStatus> = {
  shadow: 'shadow',
  guardian_review: 'evolution',
  paper_trading: 'evolution',
  pending_oracle_approval: 'evolution',
  live: 'live',
  paused: 'live',
  deprecated: 'deprecated',
};

export interface IndexedStrategy {
  id: string;
  owner: Address;
  name: string;
  /** Part A's status. */
  lifecycle: string;
  status: DataStrategyStatus;
  /** The vault a live strategy trades for; null before it is live, and once deprecated. */
  vault: Address | null;
  /** Its share of its vault: 1 / (live strategies in that vault); 0 when not live. */
  allocation: number;
  performance: Performance;
}

/**
 * A live strategy's vault: the vault at position (id mod 6) in the fixed vault order, so the
 * same strategy always lands in the same vault.
 */
export function vaultOf(id: string, deployment: Deployment): Address {
  return deployment.vaults[VAULT_IDS[Number(BigInt(id) % BigInt(VAULT_IDS.length))] ?? 'moderate'];
}

/** Every indexed strategy with its vault, allocation and simulated performance at `now`. */
export async function indexedStrategies(
  sql: Sql,
  deployment: Deployment,
  now: number,
): Promise<IndexedStrategy[]> {
  const rows = await sql.all<{
    id: string;
    owner: string;
    name: string;
    status: string;
    paper_trading_at: number | string | null;
  }>('SELECT id, owner, name, status, paper_trading_at FROM strategies ORDER BY created_at, id');
  const live = rows.filter((row) => STATUS_MAP[row.status] === 'live');
  const perVault = new Map<string, number>();
  for (const row of live) {
    const vault = vaultOf(row.id, deployment);
    perVault.set(vault, (perVault.get(vault) ?? 0) + 1);
  }
  return rows.map((row) => {
    const status = STATUS_MAP[row.status] ?? 'shadow';
    const vault = status === 'live' ? vaultOf(row.id, deployment) : null;
    return {
      id: row.id,
      owner: getAddress(row.owner),
      name: row.name,
      lifecycle: row.status,
      status,
      vault,
      allocation: vault ? 1 / (perVault.get(vault) ?? 1) : 0,
      performance: simulatePerformance(
        row.id,
        row.paper_trading_at === null ? null : Number(row.paper_trading_at),
        now,
      ),
    };
  });
}
