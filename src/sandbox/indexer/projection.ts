import type { DatabaseSync, StatementSync } from 'node:sqlite';
import { type Abi, decodeEventLog, decodeFunctionData, type Hex } from 'viem';
import { STRATEGY_STATUSES } from '../../api/schemas/values.ts';
import { ConfigurableVault, StrategyRegistryV3 } from '../chain/contracts/artifacts.ts';

/**
 * Turns the raw data of a block (its watched logs, and its reverted calls to a vault) into
 * the derived tables: vaults, their state after each block that changed it, transactions
 * with their status, positions and strategies. The indexer runs it on each new block, and on
 * every raw row kept after a reorg.
 *
 * A vault's state is what its totalAssets() is computed from (see SandboxVault.sol): the
 * asset it holds (the asset's Transfer events), what it holds for others (ERC-7540 requests),
 * its share supply (mints and burns), its yield rate (ApyChanged) and its last accrual
 * (YieldAccrued, logged at every accrual). A row in vault_states is that state after a block.
 */

export const EVENTS_ABI = [
  ...ConfigurableVault.abi.filter((item) => item.type === 'event'),
  ...StrategyRegistryV3.abi.filter((item) => item.type === 'event'),
] as Abi;

export interface RawLog {
  address: string;
  topics: Hex[];
  data: Hex;
  logIndex: number;
  txHash: string;
}

export interface FailedCall {
  txIndex: number;
  txHash: string;
  from: string;
  to: string;
  input: Hex;
}

export interface VaultState {
  balance: bigint;
  reserved: bigint;
  totalSupply: bigint;
  apyBps: bigint;
  lastAccrual: bigint;
}

/** A transaction's key in the index: its block, and its log (a failed call's is negative). */
export interface TransactionKey {
  blockNumber: number;
  logIndex: number;
}

/** What one block changed: the vaults whose state moved, and the transactions recorded. */
export interface BlockChanges {
  vaults: Set<string>;
  transactions: TransactionKey[];
}

/** A failed call is keyed below every log of its block (log indexes are never negative). */
const failedCallKey = (call: FailedCall) => -1 - call.txIndex;

const ZERO = '0x0000000000000000000000000000000000000000';

/** The types a reverted call is recorded as, by the vault function it called. */
const FAILED_CALL_TYPES: Record<
  string,
  'deposit' | 'withdraw' | 'deposit_request' | 'redeem_request'
> = {
  deposit: 'deposit',
  mint: 'deposit',
  withdraw: 'withdraw',
  redeem: 'withdraw',
  requestDeposit: 'deposit_request',
  requestRedeem: 'redeem_request',
};

/** The arguments of the watched events, by name (each event has some of them). */
interface EventArgs {
  value: bigint;
  assets: bigint;
  shares: bigint;
  apyBps: bigint;
  timestamp: bigint;
  fulfillmentDelay: bigint;
  requestId: bigint;
  from: string;
  /** An address (Transfer), or a status (StrategyStatusChanged). */
  to: unknown;
  owner: string;
  sender: string;
  controller: string;
  strategyId: string;
  name: string;
}

interface PositionRow {
  shares: bigint;
  netDeposited: bigint;
  depositedAt: number | null;
  pendingDeposit: bigint;
  claimableDeposit: bigint;
  pendingRedeem: bigint;
  claimableRedeem: bigint;
}

export function createProjection(
  db: DatabaseSync,
  watched: { usdc: string; vaults: Map<string, { async: boolean }>; registry: string },
) {
  const prepare = (sql: string): StatementSync => db.prepare(sql);
  const sql = {
    vault: prepare('SELECT address FROM vaults WHERE address = ?'),
    insertVault: prepare(
      'INSERT INTO vaults (address, created_block, created_at, fulfillment_delay) VALUES (?, ?, ?, NULL)',
    ),
    setDelay: prepare('UPDATE vaults SET fulfillment_delay = ? WHERE address = ?'),
    lastState: prepare(
      'SELECT balance, reserved, total_supply, apy_bps, last_accrual FROM vault_states WHERE vault = ? ORDER BY block_number DESC LIMIT 1',
    ),
    state: prepare(
      `INSERT INTO vault_states (vault, block_number, timestamp, balance, reserved, total_supply, apy_bps, last_accrual)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?)
       ON CONFLICT (vault, block_number) DO UPDATE SET balance = excluded.balance,
         reserved = excluded.reserved, total_supply = excluded.total_supply,
         apy_bps = excluded.apy_bps, last_accrual = excluded.last_accrual`,
    ),
    transaction: prepare(
      `INSERT INTO transactions (block_number, log_index, hash, type, vault, user_address, amount, shares, status, timestamp, request_id)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    ),
    fulfilRequest: prepare(
      `UPDATE transactions SET status = 'fulfilled', amount = ?, shares = ?
       WHERE vault = ? AND request_id = ? AND status = 'pending'`,
    ),
    claimRequests: prepare(
      `UPDATE transactions SET status = 'claimed'
       WHERE vault = ? AND user_address = ? AND type = ? AND status = 'fulfilled'`,
    ),
    position: prepare(
      `SELECT shares, net_deposited, deposited_at, pending_deposit, claimable_deposit, pending_redeem, claimable_redeem
       FROM positions WHERE user_address = ? AND vault = ?`,
    ),
    upsertPosition: prepare(
      `INSERT INTO positions (user_address, vault, shares, net_deposited, deposited_at, pending_deposit, claimable_deposit, pending_redeem, claimable_redeem)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
       ON CONFLICT (user_address, vault) DO UPDATE SET shares = excluded.shares,
         net_deposited = excluded.net_deposited, deposited_at = excluded.deposited_at,
         pending_deposit = excluded.pending_deposit, claimable_deposit = excluded.claimable_deposit,
         pending_redeem = excluded.pending_redeem, claimable_redeem = excluded.claimable_redeem`,
    ),
    strategy: prepare(
      `INSERT INTO strategies (id, owner, name, status, created_at, status_changed_at, paper_trading_at)
       VALUES (?, ?, ?, 'shadow', ?, ?, NULL) ON CONFLICT (id) DO NOTHING`,
    ),
    strategyStatus: prepare(
      `UPDATE strategies SET status = ?, status_changed_at = ?,
         paper_trading_at = COALESCE(paper_trading_at, ?) WHERE id = ?`,
    ),
  };

  /** Each vault's state as of the last block applied; loaded on first use. */
  const states = new Map<string, VaultState>();

  function stateOf(vault: string): VaultState {
    let state = states.get(vault);
    if (!state) {
      const row = sql.lastState.get(vault) as
        | {
            balance: string;
            reserved: string;
            total_supply: string;
            apy_bps: number;
            last_accrual: number;
          }
        | undefined;
      state = row
        ? {
            balance: BigInt(row.balance),
            reserved: BigInt(row.reserved),
            totalSupply: BigInt(row.total_supply),
            apyBps: BigInt(row.apy_bps),
            lastAccrual: BigInt(row.last_accrual),
          }
        : { balance: 0n, reserved: 0n, totalSupply: 0n, apyBps: 0n, lastAccrual: 0n };
      states.set(vault, state);
    }
    return state;
  }

  function changePosition(
    user: string,
    vault: string,
    change: (position: PositionRow) => void,
  ): PositionRow {
    const row = sql.position.get(user, vault) as
      | {
          shares: string;
          net_deposited: string;
          deposited_at: number | null;
          pending_deposit: string;
          claimable_deposit: string;
          pending_redeem: string;
          claimable_redeem: string;
        }
      | undefined;
    const position: PositionRow = {
      shares: BigInt(row?.shares ?? 0),
      netDeposited: BigInt(row?.net_deposited ?? 0),
      depositedAt:
        row?.deposited_at === undefined || row.deposited_at === null
          ? null
          : Number(row.deposited_at),
      pendingDeposit: BigInt(row?.pending_deposit ?? 0),
      claimableDeposit: BigInt(row?.claimable_deposit ?? 0),
      pendingRedeem: BigInt(row?.pending_redeem ?? 0),
      claimableRedeem: BigInt(row?.claimable_redeem ?? 0),
    };
    change(position);
    sql.upsertPosition.run(
      user,
      vault,
      position.shares.toString(),
      position.netDeposited.toString(),
      position.depositedAt,
      position.pendingDeposit.toString(),
      position.claimableDeposit.toString(),
      position.pendingRedeem.toString(),
      position.claimableRedeem.toString(),
    );
    return position;
  }

  /**
   * Applies one block's raw data; call inside the transaction that records the block. Answers
   * what it changed: the vaults whose state it moved, and the transactions it recorded.
   */
  function applyBlock(
    block: { number: number; timestamp: number },
    logs: RawLog[],
    failed: FailedCall[] = [],
  ): BlockChanges {
    const changed = new Set<string>();
    const created: TransactionKey[] = [];
    const record = (
      log: RawLog,
      type: string,
      vault: string,
      user: string,
      amount: bigint,
      shares: bigint | null,
      status: string,
      requestId: bigint | null = null,
    ) => {
      created.push({ blockNumber: block.number, logIndex: log.logIndex });
      sql.transaction.run(
        block.number,
        log.logIndex,
        log.txHash,
        type,
        vault,
        user.toLowerCase(),
        amount.toString(),
        shares === null ? null : shares.toString(),
        status,
        block.timestamp,
        requestId === null ? null : requestId.toString(),
      );
    };

    for (const log of logs) {
      const address = log.address.toLowerCase();
      const event = decodeEventLog({
        abi: EVENTS_ABI,
        data: log.data,
        topics: log.topics as [Hex, ...Hex[]],
        strict: false,
      }) as unknown as { eventName: string; args: EventArgs };
      const { args } = event;

      if (address === watched.registry) {
        if (event.eventName === 'StrategySubmitted') {
          sql.strategy.run(
            String(args.strategyId).toLowerCase(),
            String(args.owner).toLowerCase(),
            String(args.name),
            block.timestamp,
            block.timestamp,
          );
        } else if (event.eventName === 'StrategyStatusChanged') {
          const to = STRATEGY_STATUSES[Number(args.to)] ?? 'unknown';
          sql.strategyStatus.run(
            to,
            block.timestamp,
            to === 'paper_trading' ? block.timestamp : null,
            String(args.strategyId).toLowerCase(),
          );
        }
        continue;
      }

      if (address === watched.usdc) {
        if (event.eventName !== 'Transfer') continue;
        const from = String(args.from).toLowerCase();
        const to = String(args.to).toLowerCase();
        if (watched.vaults.has(to)) {
          stateOf(to).balance += args.value;
          changed.add(to);
        }
        if (watched.vaults.has(from)) {
          stateOf(from).balance -= args.value;
          changed.add(from);
        }
        continue;
      }

      const vault = address;
      const info = watched.vaults.get(vault);
      if (!info) continue;
      const state = stateOf(vault);
      if (!sql.vault.get(vault)) sql.insertVault.run(vault, block.number, block.timestamp);
      changed.add(vault);
      switch (event.eventName) {
        case 'ApyChanged':
          state.apyBps = args.apyBps;
          break;
        case 'YieldAccrued':
          state.lastAccrual = args.timestamp;
          break;
        case 'FulfillmentDelayChanged':
          sql.setDelay.run(Number(args.fulfillmentDelay), vault);
          break;
        case 'Transfer': {
          const from = String(args.from).toLowerCase();
          const to = String(args.to).toLowerCase();
          if (from === ZERO) state.totalSupply += args.value;
          else if (from !== vault)
            changePosition(from, vault, (p) => {
              p.shares -= args.value;
            });
          if (to === ZERO) state.totalSupply -= args.value;
          // Shares the ERC-7540 vault holds in escrow are no one's position.
          else if (to !== vault)
            changePosition(to, vault, (p) => {
              p.shares += args.value;
              // Shares received (a transfer, not a deposit) date the position too.
              p.depositedAt ??= block.timestamp;
            });
          break;
        }
        case 'Deposit': {
          // ERC-4626: Deposit(sender, owner, assets, shares). A claim on the ERC-7540 vault
          // logs it with the controller as sender.
          const owner = String(args.owner).toLowerCase();
          changePosition(owner, vault, (p) => {
            p.netDeposited += args.assets;
            p.depositedAt ??= block.timestamp;
          });
          if (!info.async) {
            record(log, 'deposit', vault, owner, args.assets, args.shares, 'fulfilled');
            break;
          }
          const controller = String(args.sender).toLowerCase();
          const left = changePosition(controller, vault, (p) => {
            p.claimableDeposit -= args.assets;
          });
          record(log, 'claim', vault, controller, args.assets, args.shares, 'claimed');
          if (left.claimableDeposit === 0n)
            sql.claimRequests.run(vault, controller, 'deposit_request');
          break;
        }
        case 'Withdraw': {
          // Withdraw(sender, receiver, owner, assets, shares); on the ERC-7540 vault the owner
          // is the controller whose fulfilled redemption is claimed.
          const owner = String(args.owner).toLowerCase();
          const left = changePosition(owner, vault, (p) => {
            p.netDeposited -= args.assets;
            if (info.async) p.claimableRedeem -= args.shares;
          });
          // A claimed redemption's assets were held apart since its fulfilment.
          if (info.async) state.reserved -= args.assets;
          if (!info.async) {
            record(log, 'withdraw', vault, owner, args.assets, args.shares, 'fulfilled');
            break;
          }
          record(log, 'claim', vault, owner, args.assets, args.shares, 'claimed');
          if (left.claimableRedeem === 0n) sql.claimRequests.run(vault, owner, 'redeem_request');
          break;
        }
        case 'DepositRequest': {
          state.reserved += args.assets;
          const controller = String(args.controller).toLowerCase();
          changePosition(controller, vault, (p) => {
            p.pendingDeposit += args.assets;
          });
          record(
            log,
            'deposit_request',
            vault,
            controller,
            args.assets,
            null,
            'pending',
            args.requestId,
          );
          break;
        }
        case 'RedeemRequest': {
          const controller = String(args.controller).toLowerCase();
          changePosition(controller, vault, (p) => {
            p.pendingRedeem += args.shares;
          });
          // Its assets are known once it is fulfilled, at the price of that moment.
          record(
            log,
            'redeem_request',
            vault,
            controller,
            0n,
            args.shares,
            'pending',
            args.requestId,
          );
          break;
        }
        case 'DepositFulfilled': {
          state.reserved -= args.assets;
          const controller = String(args.controller).toLowerCase();
          changePosition(controller, vault, (p) => {
            p.pendingDeposit -= args.assets;
            p.claimableDeposit += args.assets;
          });
          sql.fulfilRequest.run(
            args.assets.toString(),
            args.shares.toString(),
            vault,
            args.requestId.toString(),
          );
          break;
        }
        case 'RedeemFulfilled': {
          state.reserved += args.assets;
          const controller = String(args.controller).toLowerCase();
          changePosition(controller, vault, (p) => {
            p.pendingRedeem -= args.shares;
            p.claimableRedeem += args.shares;
          });
          sql.fulfilRequest.run(
            args.assets.toString(),
            args.shares.toString(),
            vault,
            args.requestId.toString(),
          );
          break;
        }
        default:
          break;
      }
    }

    for (const call of failed) {
      if (recordFailure(block, call)) {
        created.push({ blockNumber: block.number, logIndex: failedCallKey(call) });
      }
    }

    for (const vault of changed) writeState(block, vault);
    return { vaults: changed, transactions: created };
  }

  /** Records a vault's state after `block` (the block's own row, replaced if it has one). */
  function writeState(block: { number: number; timestamp: number }, vault: string): void {
    const state = stateOf(vault);
    sql.state.run(
      vault,
      block.number,
      block.timestamp,
      state.balance.toString(),
      state.reserved.toString(),
      state.totalSupply.toString(),
      Number(state.apyBps),
      Number(state.lastAccrual),
    );
  }

  /**
   * Sets a vault's state after `block` to what the chain held then (a correction); call
   * inside the transaction that records it, after the block's own logs.
   */
  function correct(
    block: { number: number; timestamp: number },
    vault: string,
    state: VaultState,
  ): void {
    states.set(vault, { ...state });
    writeState(block, vault);
  }

  /** A reverted call to a vault: a `failed` transaction of the type its function names. */
  function recordFailure(block: { number: number; timestamp: number }, call: FailedCall): boolean {
    const vault = call.to.toLowerCase();
    let decoded: { functionName: string; args?: readonly unknown[] };
    try {
      decoded = decodeFunctionData({ abi: ConfigurableVault.abi, data: call.input });
    } catch {
      return false;
    }
    const type = FAILED_CALL_TYPES[decoded.functionName];
    if (!type) return false;
    const first = decoded.args?.[0];
    const amount = typeof first === 'bigint' ? first : 0n;
    const isShares =
      decoded.functionName === 'mint' || decoded.functionName.toLowerCase().includes('redeem');
    sql.transaction.run(
      block.number,
      failedCallKey(call),
      call.txHash,
      type,
      vault,
      call.from.toLowerCase(),
      isShares ? '0' : amount.toString(),
      isShares ? amount.toString() : null,
      'failed',
      block.timestamp,
      null,
    );
    return true;
  }

  return {
    applyBlock,
    correct,
    /** A vault's state as of the last block applied. */
    stateOf: (vault: string): VaultState => ({ ...stateOf(vault) }),
    /** Forgets the cached vault states (after the derived tables were cleared). */
    reset(): void {
      states.clear();
    },
  };
}
export type Projection = ReturnType<typeof createProjection>;
