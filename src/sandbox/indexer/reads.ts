import type { DatabaseSync } from 'node:sqlite';
import { getAddress } from 'viem';
import type { z } from 'zod';
import type {
  DATA_TRANSACTION_TYPES,
  DataPosition,
  DataTransaction,
} from '../../api/schemas/index.ts';
import { VAULT_CONFIG } from '../chain/deployment.ts';
import type { Indexer } from './indexer.ts';

/** Unix seconds as ISO 8601 UTC, without milliseconds. */
export function isoTime(seconds: number): string {
  return new Date(seconds * 1000).toISOString().replace(/\.000Z$/, 'Z');
}

interface TransactionRow {
  block_number: number;
  log_index: number;
  hash: string;
  type: (typeof DATA_TRANSACTION_TYPES)[number];
  vault: string;
  user_address: string;
  amount: string;
  shares: string | null;
  status: 'pending' | 'fulfilled' | 'claimed' | 'failed';
  timestamp: number;
}

/** A user's transactions, newest first, one page of them, and how many there are in all. */
export function userTransactions(
  db: DatabaseSync,
  address: string,
  page: { type?: string | undefined; limit: number; offset: number },
): { transactions: Array<z.input<typeof DataTransaction>>; total: number } {
  const user = address.toLowerCase();
  const where = page.type ? 'user_address = ? AND type = ?' : 'user_address = ?';
  const params = page.type ? [user, page.type] : [user];
  const total = Number(
    (
      db.prepare(`SELECT COUNT(*) AS n FROM transactions WHERE ${where}`).get(...params) as {
        n: number;
      }
    ).n,
  );
  const rows = db
    .prepare(
      `SELECT * FROM transactions WHERE ${where}
       ORDER BY block_number DESC, log_index DESC LIMIT ? OFFSET ?`,
    )
    .all(...params, page.limit, page.offset) as unknown as TransactionRow[];
  return {
    total,
    transactions: rows.map((row) => ({
      hash: row.hash,
      type: row.type,
      vault: getAddress(row.vault),
      user: getAddress(row.user_address),
      amount: row.amount,
      shares: row.shares,
      status: row.status,
      timestamp: isoTime(Number(row.timestamp)),
      blockNumber: Number(row.block_number),
      logIndex: Number(row.log_index),
    })),
  };
}

/**
 * A user's open positions. `value` is what the vault's convertToAssets(shares) answers at the
 * last indexed block: OpenZeppelin's ERC-4626 formula, shares × (totalAssets + 1) /
 * (totalSupply + 1), rounded down. `pnl` is value minus net deposited (deposits less
 * withdrawals), signed; `pnlPercent` is pnl over net deposited, in percent.
 */
export function userPositions(
  index: Indexer,
  address: string,
): Array<z.input<typeof DataPosition>> {
  const rows = index.db
    .prepare(
      `SELECT p.vault, p.shares, p.net_deposited, p.deposited_at, s.total_assets, s.total_supply
       FROM positions p
       JOIN vault_snapshots s ON s.vault = p.vault
        AND s.block_number = (SELECT MAX(block_number) FROM vault_snapshots WHERE vault = p.vault)
       WHERE p.user_address = ?
       ORDER BY p.vault`,
    )
    .all(address.toLowerCase()) as Array<{
    vault: string;
    shares: string;
    net_deposited: string;
    deposited_at: number | null;
    total_assets: string;
    total_supply: string;
  }>;
  return rows
    .filter((row) => BigInt(row.shares) > 0n)
    .map((row) => {
      const shares = BigInt(row.shares);
      const value = (shares * (BigInt(row.total_assets) + 1n)) / (BigInt(row.total_supply) + 1n);
      const deposited = BigInt(row.net_deposited);
      const pnl = value - deposited;
      const id = index.vaults.get(row.vault);
      return {
        vault: getAddress(row.vault),
        vaultName: id ? VAULT_CONFIG[id].name : row.vault,
        shares: shares.toString(),
        value: value.toString(),
        pnl: pnl.toString(),
        pnlPercent: deposited > 0n ? Number((pnl * 1_000_000n) / deposited) / 10_000 : 0,
        depositedAt: row.deposited_at === null ? null : isoTime(Number(row.deposited_at)),
        // The synchronous ERC-4626 vaults have no requests waiting.
        pendingDeposit: '0',
        claimableDeposit: '0',
        pendingRedeem: '0',
        claimableRedeem: '0',
      };
    });
}
