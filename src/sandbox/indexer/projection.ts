import { type Abi, decodeEventLog, decodeFunctionData, type Hex, toEventSelector } from 'viem';
import { STRATEGY_STATUSES } from '../../api/schemas/values.ts';
import {
  AgentGovernor,
  AgentPass,
  ConfigurableVault,
  StrategyRegistryV3,
} from '../chain/contracts/artifacts.ts';
import type { Sql, SqlValue } from '../store/sql.ts';
import { insertRows } from './statements.ts';

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

/** The governor's events (proposals and votes) and AgentPass's (holdings). */
const GOVERNOR_EVENTS_ABI = AgentGovernor.abi.filter(
  (item) => item.type === 'event' && (item.name === 'ProposalCreated' || item.name === 'VoteCast'),
) as Abi;
const PASS_EVENTS_ABI = AgentPass.abi.filter(
  (item) => item.type === 'event' && item.name === 'Transfer',
) as Abi;

/** Every event the index reads, of every watched contract (source.ts asks for these). */
export const WATCHED_EVENTS_ABI = [
  ...EVENTS_ABI,
  ...GOVERNOR_EVENTS_ABI,
  ...PASS_EVENTS_ABI,
] as Abi;

/** topic0 of the events the index reads from the governor, and from AgentPass. */
export const GOVERNOR_TOPICS: readonly Hex[] = GOVERNOR_EVENTS_ABI.map((item) =>
  toEventSelector(item as Parameters<typeof toEventSelector>[0]),
);
export const PASS_TOPICS: readonly Hex[] = PASS_EVENTS_ABI.map((item) =>
  toEventSelector(item as Parameters<typeof toEventSelector>[0]),
);

/** StrategySubmitted's topic0: its log is kept with its transaction's input (the description). */
export const STRATEGY_SUBMITTED_TOPIC = toEventSelector(
  StrategyRegistryV3.abi.find(
    (item) => item.type === 'event' && item.name === 'StrategySubmitted',
  ) as Parameters<typeof toEventSelector>[0],
);

export interface RawLog {
  address: string;
  topics: Hex[];
  data: Hex;
  logIndex: number;
  txHash: string;
  /** Its transaction's input, where the derived rows need it (StrategySubmitted's). */
  input?: Hex;
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

/** A position's row as it is read. */
interface StoredPosition {
  shares: string;
  net_deposited: string;
  deposited_at: number | null;
  pending_deposit: string;
  claimable_deposit: string;
  pending_redeem: string;
  claimable_redeem: string;
}

const SQL = {
  vault: 'SELECT address FROM vaults WHERE address = ?',
  insertVault:
    'INSERT INTO vaults (address, created_block, created_at, fulfillment_delay) VALUES (?, ?, ?, NULL)',
  setDelay: 'UPDATE vaults SET fulfillment_delay = ? WHERE address = ?',
  lastState:
    'SELECT balance, reserved, total_supply, apy_bps, last_accrual FROM vault_states WHERE vault = ? ORDER BY block_number DESC LIMIT 1',
  states: `INSERT INTO vault_states (vault, block_number, timestamp, balance, reserved, total_supply, apy_bps, last_accrual)
     VALUES`,
  statesConflict: `ON CONFLICT (vault, block_number) DO UPDATE SET balance = excluded.balance,
       reserved = excluded.reserved, total_supply = excluded.total_supply,
       apy_bps = excluded.apy_bps, last_accrual = excluded.last_accrual`,
  transactions: `INSERT INTO transactions (block_number, log_index, hash, type, vault, user_address, amount, shares, status, timestamp, request_id)
     VALUES`,
  fulfilRequest: `UPDATE transactions SET status = 'fulfilled', amount = ?, shares = ?
     WHERE vault = ? AND request_id = ? AND status = 'pending'`,
  claimRequests: `UPDATE transactions SET status = 'claimed'
     WHERE vault = ? AND user_address = ? AND type = ? AND status = 'fulfilled'`,
  position: `SELECT shares, net_deposited, deposited_at, pending_deposit, claimable_deposit, pending_redeem, claimable_redeem
     FROM positions WHERE user_address = ? AND vault = ?`,
  positions: `INSERT INTO positions (user_address, vault, shares, net_deposited, deposited_at, pending_deposit, claimable_deposit, pending_redeem, claimable_redeem)
     VALUES`,
  positionsConflict: `ON CONFLICT (user_address, vault) DO UPDATE SET shares = excluded.shares,
       net_deposited = excluded.net_deposited, deposited_at = excluded.deposited_at,
       pending_deposit = excluded.pending_deposit, claimable_deposit = excluded.claimable_deposit,
       pending_redeem = excluded.pending_redeem, claimable_redeem = excluded.claimable_redeem`,
  strategy: `INSERT INTO strategies (id, owner, name, status, created_at, status_changed_at, paper_trading_at,
       description, created_block, created_log)
     VALUES (?, ?, ?, 'shadow', ?, ?, NULL, ?, ?, ?) ON CONFLICT (id) DO NOTHING`,
  proposal: `INSERT INTO proposals (id, proposer, title, description, vote_start, vote_end,
       for_votes, against_votes, abstain_votes)
     VALUES (?, ?, ?, ?, ?, ?, 0, 0, 0) ON CONFLICT (id) DO NOTHING`,
  vote: `INSERT INTO votes (proposal_id, voter, support, block_number, log_index)
     VALUES (?, ?, ?, ?, ?) ON CONFLICT (proposal_id, voter) DO NOTHING`,
  tally: [
    'UPDATE proposals SET against_votes = against_votes + ? WHERE id = ?',
    'UPDATE proposals SET for_votes = for_votes + ? WHERE id = ?',
    'UPDATE proposals SET abstain_votes = abstain_votes + ? WHERE id = ?',
  ],
  pass: 'SELECT owner, owner_index FROM agent_passes WHERE token_id = ?',
  passCount: 'SELECT COUNT(*) AS n FROM agent_passes WHERE owner = ?',
  passMoveLast: 'UPDATE agent_passes SET owner_index = ? WHERE owner = ? AND owner_index = ?',
  passSet: `INSERT INTO agent_passes (token_id, owner, owner_index) VALUES (?, ?, ?)
     ON CONFLICT (token_id) DO UPDATE SET owner = excluded.owner, owner_index = excluded.owner_index`,
  passBurn: 'DELETE FROM agent_passes WHERE token_id = ?',
  tokenBalance: 'SELECT balance FROM token_balances WHERE token = ? AND address = ?',
  tokenBalances: 'INSERT INTO token_balances (token, address, balance) VALUES',
  tokenBalancesConflict: 'ON CONFLICT (token, address) DO UPDATE SET balance = excluded.balance',
  strategyStatus: `UPDATE strategies SET status = ?, status_changed_at = ?,
       paper_trading_at = COALESCE(paper_trading_at, ?) WHERE id = ?`,
};

/**
 * The projection's statements run on the Sql given: the transaction of the step (or rollback,
 * or correction) that applies them. It keeps in memory each vault's state as of the last block
 * applied, and the vaults known to exist: reset() forgets both, and must be called whenever a
 * transaction that applied blocks is rolled back.
 */
export function createProjection(watched: {
  usdc: string;
  protocolToken: string;
  vaults: Map<string, { async: boolean }>;
  registry: string;
  governor: string;
  agentPass: string;
}) {
  /** Each vault's state as of the last block applied; loaded on first use. */
  const states = new Map<string, VaultState>();
  /** The vaults with a row in `vaults`. */
  const known = new Set<string>();

  async function stateOf(tx: Sql, vault: string): Promise<VaultState> {
    let state = states.get(vault);
    if (!state) {
      const row = await tx.get<StateRow>(SQL.lastState, vault);
      state = row
        ? toState(row)
        : { balance: 0n, reserved: 0n, totalSupply: 0n, apyBps: 0n, lastAccrual: 0n };
      // Another read of the same vault may have come first, while this one awaited.
      state = states.get(vault) ?? state;
      states.set(vault, state);
    }
    return state;
  }

  /**
   * Applies one block's raw data on `tx`, the transaction that records the block. Answers what
   * it changed: the vaults whose state it moved, and the transactions it recorded. Rows are
   * written in batches: the block's positions once each, at its end; its transactions before
   * any statement that updates transactions, and at its end.
   */
  async function applyBlock(
    tx: Sql,
    block: { number: number; timestamp: number },
    logs: RawLog[],
    failed: FailedCall[] = [],
  ): Promise<BlockChanges> {
    const changed = new Set<string>();
    const created: TransactionKey[] = [];
    const transactions: SqlValue[][] = [];
    const flushTransactions = async () => {
      await insertRows(tx, SQL.transactions, transactions.splice(0));
    };
    /** The block's positions, by user and vault, as they stand: written at the block's end. */
    const positions = new Map<string, { user: string; vault: string; position: PositionRow }>();
    const changePosition = async (
      user: string,
      vault: string,
      change: (position: PositionRow) => void,
    ): Promise<PositionRow> => {
      const key = `${user} ${vault}`;
      let held = positions.get(key);
      if (!held) {
        const row = await tx.get<StoredPosition>(SQL.position, user, vault);
        held = { user, vault, position: toPosition(row) };
        positions.set(key, held);
      }
      change(held.position);
      return held.position;
    };
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
      transactions.push([
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
      ]);
    };
    const fulfilRequest = async (vault: string, args: EventArgs) => {
      await flushTransactions();
      await tx.run(
        SQL.fulfilRequest,
        args.assets.toString(),
        args.shares.toString(),
        vault,
        args.requestId.toString(),
      );
    };
    const claimRequests = async (vault: string, user: string, type: string) => {
      await flushTransactions();
      await tx.run(SQL.claimRequests, vault, user, type);
    };
    /** The block's token balances, by token and account, as they stand: written at its end. */
    const balances = new Map<string, { token: string; account: string; balance: bigint }>();
    const moveTokens = async (token: string, account: string, by: bigint) => {
      if (account === ZERO) return;
      const key = `${token} ${account}`;
      let held = balances.get(key);
      if (!held) {
        const row = await tx.get<{ balance: string }>(SQL.tokenBalance, token, account);
        held = { token, account, balance: BigInt(row?.balance ?? 0) };
        balances.set(key, held);
      }
      held.balance += by;
    };

    for (const log of logs) {
      const address = log.address.toLowerCase();
      if (address === watched.governor) {
        await applyGovernorLog(tx, block, log);
        continue;
      }
      if (address === watched.agentPass) {
        await applyPassLog(tx, log);
        continue;
      }
      const event = decodeEventLog({
        abi: EVENTS_ABI,
        data: log.data,
        topics: log.topics as [Hex, ...Hex[]],
        strict: false,
      }) as unknown as { eventName: string; args: EventArgs };
      const { args } = event;

      if (address === watched.registry) {
        if (event.eventName === 'StrategySubmitted') {
          await tx.run(
            SQL.strategy,
            String(args.strategyId).toLowerCase(),
            String(args.owner).toLowerCase(),
            String(args.name),
            block.timestamp,
            block.timestamp,
            descriptionOf(log.input),
            block.number,
            log.logIndex,
          );
        } else if (event.eventName === 'StrategyStatusChanged') {
          const to = STRATEGY_STATUSES[Number(args.to)] ?? 'unknown';
          await tx.run(
            SQL.strategyStatus,
            to,
            block.timestamp,
            to === 'paper_trading' ? block.timestamp : null,
            String(args.strategyId).toLowerCase(),
          );
        }
        continue;
      }

      if (address === watched.usdc || address === watched.protocolToken) {
        if (event.eventName !== 'Transfer') continue;
        const from = String(args.from).toLowerCase();
        const to = String(args.to).toLowerCase();
        await moveTokens(address, from, -args.value);
        await moveTokens(address, to, args.value);
        if (address !== watched.usdc) continue;
        if (watched.vaults.has(to)) {
          (await stateOf(tx, to)).balance += args.value;
          changed.add(to);
        }
        if (watched.vaults.has(from)) {
          (await stateOf(tx, from)).balance -= args.value;
          changed.add(from);
        }
        continue;
      }

      const vault = address;
      const info = watched.vaults.get(vault);
      if (!info) continue;
      const state = await stateOf(tx, vault);
      if (!known.has(vault)) {
        if (!(await tx.get(SQL.vault, vault))) {
          await tx.run(SQL.insertVault, vault, block.number, block.timestamp);
        }
        known.add(vault);
      }
      changed.add(vault);
      switch (event.eventName) {
        case 'ApyChanged':
          state.apyBps = args.apyBps;
          break;
        case 'YieldAccrued':
          state.lastAccrual = args.timestamp;
          break;
        case 'FulfillmentDelayChanged':
          await tx.run(SQL.setDelay, Number(args.fulfillmentDelay), vault);
          break;
        case 'Transfer': {
          const from = String(args.from).toLowerCase();
          const to = String(args.to).toLowerCase();
          if (from === ZERO) state.totalSupply += args.value;
          else if (from !== vault)
            await changePosition(from, vault, (p) => {
              p.shares -= args.value;
            });
          if (to === ZERO) state.totalSupply -= args.value;
          // Shares the ERC-7540 vault holds in escrow are no one's position.
          else if (to !== vault)
            await changePosition(to, vault, (p) => {
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
          await changePosition(owner, vault, (p) => {
            p.netDeposited += args.assets;
            p.depositedAt ??= block.timestamp;
          });
          if (!info.async) {
            record(log, 'deposit', vault, owner, args.assets, args.shares, 'fulfilled');
            break;
          }
          const controller = String(args.sender).toLowerCase();
          const left = await changePosition(controller, vault, (p) => {
            p.claimableDeposit -= args.assets;
          });
          record(log, 'claim', vault, controller, args.assets, args.shares, 'claimed');
          if (left.claimableDeposit === 0n)
            await claimRequests(vault, controller, 'deposit_request');
          break;
        }
        case 'Withdraw': {
          // Withdraw(sender, receiver, owner, assets, shares); on the ERC-7540 vault the owner
          // is the controller whose fulfilled redemption is claimed.
          const owner = String(args.owner).toLowerCase();
          const left = await changePosition(owner, vault, (p) => {
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
          if (left.claimableRedeem === 0n) await claimRequests(vault, owner, 'redeem_request');
          break;
        }
        case 'DepositRequest': {
          state.reserved += args.assets;
          const controller = String(args.controller).toLowerCase();
          await changePosition(controller, vault, (p) => {
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
          await changePosition(controller, vault, (p) => {
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
          await changePosition(controller, vault, (p) => {
            p.pendingDeposit -= args.assets;
            p.claimableDeposit += args.assets;
          });
          await fulfilRequest(vault, args);
          break;
        }
        case 'RedeemFulfilled': {
          state.reserved += args.assets;
          const controller = String(args.controller).toLowerCase();
          await changePosition(controller, vault, (p) => {
            p.pendingRedeem -= args.shares;
            p.claimableRedeem += args.shares;
          });
          await fulfilRequest(vault, args);
          break;
        }
        default:
          break;
      }
    }

    for (const call of failed) {
      const row = failureRow(block, call);
      if (row) {
        transactions.push(row);
        created.push({ blockNumber: block.number, logIndex: failedCallKey(call) });
      }
    }
    await flushTransactions();
    await insertRows(
      tx,
      SQL.positions,
      [...positions.values()].map(({ user, vault, position }) => [
        user,
        vault,
        position.shares.toString(),
        position.netDeposited.toString(),
        position.depositedAt,
        position.pendingDeposit.toString(),
        position.claimableDeposit.toString(),
        position.pendingRedeem.toString(),
        position.claimableRedeem.toString(),
      ]),
      SQL.positionsConflict,
    );
    await insertRows(
      tx,
      SQL.tokenBalances,
      [...balances.values()].map(({ token, account, balance }) => [
        token,
        account,
        balance.toString(),
      ]),
      SQL.tokenBalancesConflict,
    );
    await writeStates(tx, block, [...changed]);
    return { vaults: changed, transactions: created };
  }

  /** A proposal made (ProposalCreated), or a vote on one (VoteCast): its tally moves. */
  async function applyGovernorLog(tx: Sql, block: { number: number }, log: RawLog): Promise<void> {
    const event = decodeEventLog({
      abi: GOVERNOR_EVENTS_ABI,
      data: log.data,
      topics: log.topics as [Hex, ...Hex[]],
      strict: false,
    }) as unknown as { eventName: string; args: Record<string, unknown> };
    const { args } = event;
    if (event.eventName === 'ProposalCreated') {
      await tx.run(
        SQL.proposal,
        Number(args.proposalId),
        String(args.proposer).toLowerCase(),
        String(args.title),
        String(args.description),
        Number(args.voteStart),
        Number(args.voteEnd),
      );
    } else if (event.eventName === 'VoteCast') {
      const support = Number(args.support);
      const tally = SQL.tally[support];
      if (tally) await tx.run(tally, Number(args.weight), Number(args.proposalId));
      await tx.run(
        SQL.vote,
        Number(args.proposalId),
        String(args.voter).toLowerCase(),
        support,
        block.number,
        log.logIndex,
      );
    }
  }

  /**
   * An AgentPass moved (minted, transferred or burnt): its owner, and the owners' token order
   * as ERC721Enumerable keeps it (the sender's last token takes the place of the one leaving;
   * the receiver's new one goes last).
   */
  async function applyPassLog(tx: Sql, log: RawLog): Promise<void> {
    // An ERC-721 Transfer has its token id as a fourth topic; approvals and roles are not read.
    if (!PASS_TOPICS.includes(log.topics[0] as Hex) || log.topics.length !== 4) return;
    const event = decodeEventLog({
      abi: PASS_EVENTS_ABI,
      data: log.data,
      topics: log.topics as [Hex, ...Hex[]],
      strict: false,
    }) as unknown as { eventName: string; args: { from: string; to: string; tokenId: bigint } };
    if (event.eventName !== 'Transfer') return;
    const from = String(event.args.from).toLowerCase();
    const to = String(event.args.to).toLowerCase();
    const tokenId = Number(event.args.tokenId);
    if (from === to) return;
    const count = async (owner: string) =>
      Number((await tx.get<{ n: number | string }>(SQL.passCount, owner))?.n ?? 0);
    if (from !== ZERO) {
      const held = await tx.get<{ owner_index: number | string }>(SQL.pass, tokenId);
      if (held) {
        const index = Number(held.owner_index);
        const last = (await count(from)) - 1;
        await tx.run(SQL.passBurn, tokenId);
        if (index !== last) await tx.run(SQL.passMoveLast, index, from, last);
      }
    }
    if (to !== ZERO) await tx.run(SQL.passSet, tokenId, to, await count(to));
  }

  /** Records vaults' states after `block` (the block's own rows, replaced if it has them). */
  async function writeStates(
    tx: Sql,
    block: { number: number; timestamp: number },
    vaults: string[],
  ): Promise<void> {
    const rows: SqlValue[][] = [];
    for (const vault of vaults) {
      const state = await stateOf(tx, vault);
      rows.push([
        vault,
        block.number,
        block.timestamp,
        state.balance.toString(),
        state.reserved.toString(),
        state.totalSupply.toString(),
        Number(state.apyBps),
        Number(state.lastAccrual),
      ]);
    }
    await insertRows(tx, SQL.states, rows, SQL.statesConflict);
  }

  /**
   * Sets a vault's state after `block` to what the chain held then (a correction), on `tx`, the
   * transaction that records it, after the block's own logs.
   */
  async function correct(
    tx: Sql,
    block: { number: number; timestamp: number },
    vault: string,
    state: VaultState,
  ): Promise<void> {
    states.set(vault, { ...state });
    await writeStates(tx, block, [vault]);
  }

  return {
    applyBlock,
    correct,
    /** A vault's state as of the last block applied (read through `sql` if not cached). */
    stateOf: async (sql: Sql, vault: string): Promise<VaultState> => ({
      ...(await stateOf(sql, vault)),
    }),
    /**
     * Forgets what is kept in memory (after the derived tables were cleared, or a transaction
     * that applied blocks was rolled back).
     */
    reset(): void {
      states.clear();
      known.clear();
    },
  };
}
export type Projection = ReturnType<typeof createProjection>;

/** A strategy's description, from its submit() call's input; empty when it cannot be read. */
function descriptionOf(input: Hex | undefined): string {
  if (input === undefined) return '';
  try {
    const call = decodeFunctionData({ abi: StrategyRegistryV3.abi, data: input });
    return call.functionName === 'submit' ? String(call.args[2]) : '';
  } catch {
    // Submitted through another contract: its call is not submit()'s.
    return '';
  }
}

/** A position as stored, or an empty one. */
function toPosition(row: StoredPosition | undefined): PositionRow {
  return {
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
}

/**
 * A vault state's row (vault_states, vault_corrections), as read: BIGINT columns may come as
 * numbers or decimal strings (SQLite, PostgreSQL).
 */
export interface StateRow {
  block_number?: number | string;
  timestamp?: number | string;
  balance: string;
  reserved: string;
  total_supply: string;
  apy_bps: number | string;
  last_accrual: number | string;
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

/**
 * A reverted call to a vault, as a `failed` transaction's row of the type its function names;
 * undefined for a call that is none of them.
 */
function failureRow(
  block: { number: number; timestamp: number },
  call: FailedCall,
): SqlValue[] | undefined {
  const vault = call.to.toLowerCase();
  let decoded: { functionName: string; args?: readonly unknown[] };
  try {
    decoded = decodeFunctionData({ abi: ConfigurableVault.abi, data: call.input });
  } catch {
    return undefined;
  }
  const type = FAILED_CALL_TYPES[decoded.functionName];
  if (!type) return undefined;
  const first = decoded.args?.[0];
  const amount = typeof first === 'bigint' ? first : 0n;
  const isShares =
    decoded.functionName === 'mint' || decoded.functionName.toLowerCase().includes('redeem');
  return [
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
  ];
}
