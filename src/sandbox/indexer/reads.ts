import { getAddress } from 'viem';
import type { z } from 'zod';
import type {
  DATA_TRANSACTION_TYPES,
  DataPosition,
  DataTransaction,
  VaultId,
} from '../../api/schemas/index.ts';
import { VAULT_CONFIG } from '../chain/deployment.ts';
import type { Sql } from '../store/sql.ts';
import { type StateRow, toState, type VaultState } from './projection.ts';
import { convertToAssets, totalAssetsAt } from './vault-math.ts';
import type { IndexView } from './view.ts';

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
export async function userTransactions(
  sql: Sql,
  address: string,
  page: { type?: string | undefined; limit: number; offset: number },
): Promise<{ transactions: Array<z.input<typeof DataTransaction>>; total: number }> {
  const user = address.toLowerCase();
  const where = page.type ? 'user_address = ? AND type = ?' : 'user_address = ?';
  const params = page.type ? [user, page.type] : [user];
  const counted = await sql.get<{ n: number | string }>(
    `SELECT COUNT(*) AS n FROM transactions WHERE ${where}`,
    ...params,
  );
  const rows = await sql.all<TransactionRow>(
    `SELECT * FROM transactions WHERE ${where}
       ORDER BY block_number DESC, log_index DESC LIMIT ? OFFSET ?`,
    ...params,
    page.limit,
    page.offset,
  );
  // COUNT(*) is a BIGINT on PostgreSQL.
  return { total: Number(counted?.n ?? 0), transactions: rows.map(transactionItem) };
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

/**
 * The transactions with these keys (block and log index), in the order of the keys. One
 * statement for all of them: the keys of a commit are the transactions its blocks recorded,
 * so the blocks they span hold little else.
 */
export async function transactionsAt(
  sql: Sql,
  keys: ReadonlyArray<{ blockNumber: number; logIndex: number }>,
): Promise<Array<z.input<typeof DataTransaction>>> {
  if (keys.length === 0) return [];
  const blocks = keys.map((key) => key.blockNumber);
  const rows = await sql.all<TransactionRow>(
    'SELECT * FROM transactions WHERE block_number >= ? AND block_number <= ?',
    Math.min(...blocks),
    Math.max(...blocks),
  );
  const byKey = new Map(
    rows.map((row) => [`${Number(row.block_number)}:${Number(row.log_index)}`, row]),
  );
  return keys.flatMap((key) => {
    const row = byKey.get(`${key.blockNumber}:${key.logIndex}`);
    return row ? [transactionItem(row)] : [];
  });
}

/** Whether the index holds any vault transaction or position of `address`. */
export async function hasIndexedActivity(sql: Sql, address: string): Promise<boolean> {
  const user = address.toLowerCase();
  const found = await sql.get(
    `SELECT 1 AS found FROM transactions WHERE user_address = ?
       UNION ALL SELECT 1 AS found FROM positions WHERE user_address = ? LIMIT 1`,
    user,
    user,
  );
  return found !== undefined;
}

/**
 * When a user first did anything in each vault (a request, before any deposit), in Unix
 * seconds, by the vault's lower-case address.
 */
export async function firstActivityAt(sql: Sql, user: string): Promise<Map<string, number>> {
  const rows = await sql.all<{ vault: string; first_at: number | string }>(
    'SELECT vault, MIN(timestamp) AS first_at FROM transactions WHERE user_address = ? GROUP BY vault',
    user.toLowerCase(),
  );
  return new Map(rows.map((row) => [row.vault, Number(row.first_at)]));
}

/**
 * A user's positions, each with its vault's state as of a time: VAULT_STATE_AT_SQL's probe per
 * position, then the state's row by key (no sort).
 */
export const USER_POSITIONS_SQL = `SELECT p.vault, p.shares, p.net_deposited, p.deposited_at,
    p.pending_deposit, p.claimable_deposit, p.pending_redeem, p.claimable_redeem,
    s.balance, s.reserved, s.total_supply, s.apy_bps, s.last_accrual
  FROM positions p
  LEFT JOIN vault_states s ON s.vault = p.vault AND s.block_number = (
    SELECT block_number FROM vault_states
    WHERE vault = p.vault AND timestamp <= ?
    ORDER BY timestamp DESC, block_number DESC LIMIT 1)
  WHERE p.user_address = ? ORDER BY p.vault`;

/**
 * A user's open positions at the last indexed block. `value` is convertToAssets(shares) there
 * (vault-math.ts). `pnl` is value minus net deposited (deposits and claimed deposits, less
 * withdrawals and claimed redemptions), signed; `pnlPercent` is pnl over net deposited, in
 * percent. On the ERC-7540 vault, pendingDeposit and claimableDeposit are assets and
 * pendingRedeem and claimableRedeem are shares, as its request views answer them.
 */
export async function userPositions(
  sql: Sql,
  /** The deployment's vaults, by lower-case address. */
  vaults: ReadonlyMap<string, VaultId>,
  now: number,
  address: string,
): Promise<Array<z.input<typeof DataPosition>>> {
  const rows = await sql.all<
    {
      vault: string;
      shares: string;
      net_deposited: string;
      deposited_at: number | string | null;
      pending_deposit: string;
      claimable_deposit: string;
      pending_redeem: string;
      claimable_redeem: string;
    } & { [K in keyof StateRow]: StateRow[K] | null }
  >(USER_POSITIONS_SQL, now, address.toLowerCase());
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
      const state = row.balance === null ? undefined : toState(row as StateRow);
      const value = state
        ? convertToAssets(shares, totalAssetsAt(state, now), state.totalSupply)
        : 0n;
      const deposited = BigInt(row.net_deposited);
      const pnl = value - deposited;
      const id = vaults.get(row.vault);
      return {
        vault: getAddress(row.vault),
        vaultName: id ? VAULT_CONFIG[id].name : row.vault,
        shares: shares.toString(),
        value: value.toString(),
        pnl: pnl.toString(),
        pnlPercent: deposited > 0n ? Number((pnl * 1_000_000n) / deposited) / 10_000 : 0,
        depositedAt: row.deposited_at === null ? null : isoTime(Number(row.deposited_at)),
        pendingDeposit: String(row.pending_deposit),
        claimableDeposit: String(row.claimable_deposit),
        pendingRedeem: String(row.pending_redeem),
        claimableRedeem: String(row.claimable_redeem),
      };
    });
}

/** The data API's "now": the last indexed block's timestamp (sandbox time). */
export function indexTime(index: Pick<IndexView, 'checkpoint'>): number {
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
export async function vaultStateAt(
  sql: Sql,
  vault: string,
  at: number,
): Promise<VaultState | undefined> {
  const row = await sql.get<StateRow>(VAULT_STATE_AT_SQL, vault, at);
  return row && toState(row);
}
