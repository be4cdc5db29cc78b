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
import type { VaultState } from './projection.ts';
import { statement } from './statements.ts';
import { convertToAssets, totalAssetsAt } from './vault-math.ts';

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
      statement(db, `SELECT COUNT(*) AS n FROM transactions WHERE ${where}`).get(...params) as {
        n: number;
      }
    ).n,
  );
  const rows = statement(
    db,
    `SELECT * FROM transactions WHERE ${where}
       ORDER BY block_number DESC, log_index DESC LIMIT ? OFFSET ?`,
  ).all(...params, page.limit, page.offset) as unknown as TransactionRow[];
  return { total, transactions: rows.map(transactionItem) };
}

/** A transaction row as the data API answers it. */
export function transactionItem(row: TransactionRow): z.input<typeof DataTransaction> {
  return {
    hash: row.hash,
    type: row.type,
    vault: getAddress(row.vault),
    user: getAddress(row.user_address),
    amount: row.amount,
    shares: row.shares,
    status: row.status,
    timestamp: isoTime(Number(row.timestamp)),
    blockNumber: Number(row.block_number),
    // A failed call is keyed below its block's logs (projection.ts): it logged nothing.
    logIndex: Number(row.log_index) < 0 ? null : Number(row.log_index),
  };
}

/** The transactions with these keys (block and log index), in the order of the keys. */
export function transactionsAt(
  db: DatabaseSync,
  keys: Array<{ blockNumber: number; logIndex: number }>,
): Array<z.input<typeof DataTransaction>> {
  const byKey = statement(
    db,
    'SELECT * FROM transactions WHERE block_number = ? AND log_index = ?',
  );
  return keys.flatMap((key) => {
    const row = byKey.get(key.blockNumber, key.logIndex) as TransactionRow | undefined;
    return row ? [transactionItem(row)] : [];
  });
}

/** Whether the index holds any vault transaction or position of `address`. */
export function hasIndexedActivity(db: DatabaseSync, address: string): boolean {
  const user = address.toLowerCase();
  return (
    statement(
      db,
      `SELECT 1 FROM transactions WHERE user_address = ?
       UNION ALL SELECT 1 FROM positions WHERE user_address = ? LIMIT 1`,
    ).get(user, user) !== undefined
  );
}

/** When a user first did anything in a vault (a request, before any deposit), or undefined. */
export function firstActivityAt(db: DatabaseSync, user: string, vault: string): number | undefined {
  const row = statement(
    db,
    'SELECT MIN(timestamp) AS at FROM transactions WHERE user_address = ? AND vault = ?',
  ).get(user.toLowerCase(), vault.toLowerCase()) as { at: number | null } | undefined;
  return row?.at === null || row?.at === undefined ? undefined : Number(row.at);
}

/**
 * A user's open positions at the last indexed block. `value` is convertToAssets(shares) there
 * (vault-math.ts). `pnl` is value minus net deposited (deposits and claimed deposits, less
 * withdrawals and claimed redemptions), signed; `pnlPercent` is pnl over net deposited, in
 * percent. On the ERC-7540 vault, pendingDeposit and claimableDeposit are assets and
 * pendingRedeem and claimableRedeem are shares, as its request views answer them.
 */
export function userPositions(
  index: Indexer,
  address: string,
): Array<z.input<typeof DataPosition>> {
  const now = indexTime(index);
  const rows = statement(
    index.db,
    `SELECT vault, shares, net_deposited, deposited_at, pending_deposit, claimable_deposit,
         pending_redeem, claimable_redeem
       FROM positions WHERE user_address = ? ORDER BY vault`,
  ).all(address.toLowerCase()) as Array<{
    vault: string;
    shares: string;
    net_deposited: string;
    deposited_at: number | null;
    pending_deposit: string;
    claimable_deposit: string;
    pending_redeem: string;
    claimable_redeem: string;
  }>;
  return rows
    .filter(
      (row) =>
        BigInt(row.shares) > 0n ||
        BigInt(row.pending_deposit) > 0n ||
        BigInt(row.claimable_deposit) > 0n ||
        BigInt(row.pending_redeem) > 0n ||
        BigInt(row.claimable_redeem) > 0n,
    )
    .map((row) => {
      const shares = BigInt(row.shares);
      const state = vaultStateAt(index.db, row.vault, now);
      const value = state
        ? convertToAssets(shares, totalAssetsAt(state, now), state.totalSupply)
        : 0n;
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
        pendingDeposit: row.pending_deposit,
        claimableDeposit: row.claimable_deposit,
        pendingRedeem: row.pending_redeem,
        claimableRedeem: row.claimable_redeem,
      };
    });
}

/** The data API's "now": the last indexed block's timestamp (sandbox time). */
export function indexTime(index: Indexer): number {
  return index.checkpoint()?.timestamp ?? 0;
}

/**
 * A vault's state as of the last block at or before `at`. Block timestamps never decrease, so
 * the last (timestamp, block) pair is the last block, and the order is the index's
 * (vault_states_by_vault_time): one probe however long the vault's history.
 */
export const VAULT_STATE_AT_SQL = `SELECT balance, reserved, total_supply, apy_bps, last_accrual
  FROM vault_states WHERE vault = ? AND timestamp <= ?
  ORDER BY timestamp DESC, block_number DESC LIMIT 1`;

/** A vault's state as of the last block at or before `at`; undefined before its creation. */
export function vaultStateAt(db: DatabaseSync, vault: string, at: number): VaultState | undefined {
  const row = statement(db, VAULT_STATE_AT_SQL).get(vault, at) as StateRow | undefined;
  return row && toState(row);
}

export interface StateRow {
  block_number?: number;
  timestamp?: number;
  balance: string;
  reserved: string;
  total_supply: string;
  apy_bps: number;
  last_accrual: number;
}

export function toState(row: StateRow): VaultState {
  return {
    balance: BigInt(row.balance),
    reserved: BigInt(row.reserved),
    totalSupply: BigInt(row.total_supply),
    apyBps: BigInt(row.apy_bps),
    lastAccrual: BigInt(row.last_accrual),
  };
}
