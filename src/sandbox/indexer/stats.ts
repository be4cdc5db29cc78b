import type { z } from 'zod';
import type { ProtocolStats } from '../../api/schemas/index.ts';
import type { Indexer } from './indexer.ts';
import { indexTime, isoTime } from './reads.ts';
import { statement } from './statements.ts';
import type { IndexedStrategy } from './strategies.ts';
import { usdOf, type VaultSummary } from './vaults.ts';

/**
 * GET /v1/protocol/stats, at the last indexed block. `users` are the addresses with any
 * indexed vault transaction; `volume24h` sums the assets of deposits, withdrawals and claims
 * in the 24 hours of sandbox time before that block (requests move nothing until claimed).
 */
export function protocolStats(
  index: Indexer,
  /** How many agents the store holds. */
  agents: number,
  vaults: VaultSummary[],
  strategies: IndexedStrategy[],
): z.input<typeof ProtocolStats> {
  const db = index.db;
  const now = indexTime(index);
  const totalTvl = vaults.reduce((sum, vault) => sum + vault.tvl, 0n);
  const count = (sql: string, ...params: Array<number | string>) =>
    Number((statement(db, sql).get(...params) as { n: number }).n);
  const recent = statement(
    db,
    `SELECT amount FROM transactions
       WHERE timestamp > ? AND type IN ('deposit', 'withdraw', 'claim') AND status <> 'failed'`,
  ).all(now - 24 * 3600) as Array<{ amount: string }>;
  return {
    totalTvl: totalTvl.toString(),
    totalTvlUsd: usdOf(totalTvl),
    vaults: vaults.length,
    strategies: strategies.length,
    liveStrategies: strategies.filter((s) => s.status === 'live').length,
    agents,
    users: count('SELECT COUNT(DISTINCT user_address) AS n FROM transactions'),
    transactions: count('SELECT COUNT(*) AS n FROM transactions'),
    volume24h: recent.reduce((sum, row) => sum + BigInt(row.amount), 0n).toString(),
    blockNumber: index.checkpoint()?.number ?? 0,
    updatedAt: isoTime(now),
  };
}
