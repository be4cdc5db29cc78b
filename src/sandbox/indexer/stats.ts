import type { z } from 'zod';
import type { ProtocolStats } from '../../api/schemas/index.ts';
import type { Sql } from '../store/sql.ts';
import { isoTime } from './reads.ts';
import type { IndexedStrategy } from './strategies.ts';
import { usdOf, type VaultSummary } from './vaults.ts';

/**
 * GET /v1/protocol/stats, at the last indexed block. `users` are the addresses with any
 * indexed vault transaction; `volume24h` sums the assets of deposits, withdrawals and claims
 * in the 24 hours of sandbox time before that block (requests move nothing until claimed).
 */
export async function protocolStats(
  sql: Sql,
  /** The last indexed block: its number and time. */
  at: { number: number; timestamp: number },
  /** How many agents the store holds. */
  agents: number,
  vaults: readonly VaultSummary[],
  strategies: readonly IndexedStrategy[],
): Promise<z.input<typeof ProtocolStats>> {
  const now = at.timestamp;
  const totalTvl = vaults.reduce((sum, vault) => sum + vault.tvl, 0n);
  // COUNT is a BIGINT on PostgreSQL (a string without a type parser): Number() either way.
  const counts = await sql.get<{ users: number | string; transactions: number | string }>(
    'SELECT COUNT(DISTINCT user_address) AS users, COUNT(*) AS transactions FROM transactions',
  );
  // uint256 amounts are summed here, exactly, rather than by the database (a REAL in SQLite).
  const recent = await sql.all<{ amount: string }>(
    `SELECT amount FROM transactions
       WHERE timestamp > ? AND type IN ('deposit', 'withdraw', 'claim') AND status <> 'failed'`,
    now - 24 * 3600,
  );
  return {
    totalTvl: totalTvl.toString(),
    totalTvlUsd: usdOf(totalTvl),
    vaults: vaults.length,
    strategies: strategies.length,
    liveStrategies: strategies.filter((s) => s.status === 'live').length,
    agents,
    users: Number(counts?.users ?? 0),
    transactions: Number(counts?.transactions ?? 0),
    volume24h: recent.reduce((sum, row) => sum + BigInt(row.amount), 0n).toString(),
    blockNumber: at.number,
    updatedAt: isoTime(now),
  };
}
