import { type Address, getAddress } from 'viem';
import { VAULT_IDS } from '../../api/schemas/values.ts';
import { type Deployment, VAULT_CONFIG } from '../chain/deployment.ts';
import { formatUsdc, type HeldPosition, positionsAnswer } from '../chain/vaults.ts';
import { HttpError } from '../errors.ts';
import type { Sql } from '../store/sql.ts';
import { IndexUnavailableError } from './failure.ts';
import { ethBalanceAt } from './raw-store.ts';
import { vaultStateAt } from './reads.ts';
import { convertToAssets, totalAssetsAt } from './vault-math.ts';
import type { IndexView } from './view.ts';

/**
 * Part A's reads (/api/v1: vaults, positions, stats, proposals, strategies, NFTs), answered from
 * the index rather than the chain, so that a writer and a read replica (which runs no chain)
 * answer them alike by construction. Each answers what the chain's views answer
 * (chain/vaults.ts, governance.ts, strategies.ts, agent-wallets.ts), as of the index's "now":
 * the last indexed block's time. The write path indexes before it answers (syncForWrite), so
 * an author reads its own write here at once.
 */

/**
 * `work` on the index's committed rows; an index that cannot answer (it failed and is rebuilt,
 * or its database cannot be reached) is a 503 in Part A's error shape.
 */
export async function readPartA<T>(index: IndexView, work: (sql: Sql) => Promise<T>): Promise<T> {
  try {
    return await index.read(work);
  } catch (error) {
    if (error instanceof IndexUnavailableError) throw new HttpError(503, error.message);
    throw error;
  }
}

/** Every vault with its totals at `now` (chain/vaults.ts listVaults). APY is a percentage. */
export async function indexedVaults(sql: Sql, deployment: Deployment, now: number) {
  const vaults = [];
  for (const id of VAULT_IDS) {
    const address = deployment.vaults[id];
    const state = await vaultStateAt(sql, address.toLowerCase(), now);
    vaults.push({
      vault_id: id,
      address,
      name: VAULT_CONFIG[id].name,
      asset: deployment.usdc,
      total_assets: formatUsdc(state ? totalAssetsAt(state, now) : 0n),
      apy: Number(state?.apyBps ?? 0n) / 100,
      status: 'active',
    });
  }
  return vaults;
}

/** The wallet's shares in every vault it holds, valued at `now` (chain/vaults.ts positionsOf). */
export async function indexedPositions(
  sql: Sql,
  deployment: Deployment,
  now: number,
  owner: Address,
) {
  const rows = await sql.all<{ vault: string; shares: string }>(
    'SELECT vault, shares FROM positions WHERE user_address = ?',
    owner.toLowerCase(),
  );
  const sharesOf = new Map(rows.map((row) => [row.vault, BigInt(row.shares)]));
  const held: HeldPosition[] = [];
  for (const id of VAULT_IDS) {
    const address = deployment.vaults[id];
    const shares = sharesOf.get(address.toLowerCase()) ?? 0n;
    if (shares <= 0n) continue;
    const state = await vaultStateAt(sql, address.toLowerCase(), now);
    const value = state
      ? convertToAssets(shares, totalAssetsAt(state, now), state.totalSupply)
      : 0n;
    held.push({ id, address, shares, value });
  }
  return positionsAnswer(held);
}

/**
 * Every USDC ever deposited into the vaults, yield not counted (the vaults' totalDeposited):
 * synchronous deposits, and ERC-7540 deposit requests once fulfilled. Summed here, exactly
 * (index.db holds amounts as text).
 */
export async function indexedTotalDeposited(sql: Sql): Promise<bigint> {
  const rows = await sql.all<{ amount: string }>(
    `SELECT amount FROM transactions
       WHERE (type = 'deposit' AND status = 'fulfilled')
          OR (type = 'deposit_request' AND status IN ('fulfilled', 'claimed'))`,
  );
  return rows.reduce((sum, row) => sum + BigInt(row.amount), 0n);
}

/** How many strategies were ever submitted (the registry's totalStrategies). */
export async function indexedTotalStrategies(sql: Sql): Promise<number> {
  const row = await sql.get<{ n: number | string }>('SELECT COUNT(*) AS n FROM strategies');
  return Number(row?.n ?? 0);
}

/** How many strategies `owner` submitted (the registry's strategyCountOf). */
export async function indexedStrategyCount(sql: Sql, owner: Address): Promise<number> {
  const row = await sql.get<{ n: number | string }>(
    'SELECT COUNT(*) AS n FROM strategies WHERE owner = ?',
    owner.toLowerCase(),
  );
  return Number(row?.n ?? 0);
}

/** The owner's strategies in the registry's order (chain/strategies.ts strategiesOf). */
export async function indexedStrategiesOf(sql: Sql, deployment: Deployment, owner: Address) {
  const rows = await sql.all<{
    id: string;
    name: string;
    description: string;
    status: string;
    created_at: number | string;
    status_changed_at: number | string;
  }>(
    `SELECT id, name, description, status, created_at, status_changed_at FROM strategies
       WHERE owner = ? ORDER BY created_block, created_log`,
    owner.toLowerCase(),
  );
  return rows.map((row) => ({
    strategy_id: row.id,
    name: row.name,
    description: row.description,
    status: row.status,
    created_at: Number(row.created_at),
    last_status_change: Number(row.status_changed_at),
    strategy_contract: deployment.strategy_registry,
  }));
}

/**
 * Proposals still open for votes at `now`, newest first (chain/governance.ts activeProposals):
 * `now` is the time the next block will carry.
 */
export async function indexedActiveProposals(sql: Sql, now: number) {
  const rows = await sql.all<{
    id: number | string;
    proposer: string;
    title: string;
    description: string;
    vote_start: number | string;
    vote_end: number | string;
    for_votes: number | string;
    against_votes: number | string;
    abstain_votes: number | string;
  }>('SELECT * FROM proposals WHERE vote_end > ? ORDER BY id DESC', now);
  return rows.map((row) => ({
    proposal_id: Number(row.id),
    title: row.title,
    description: row.description,
    proposer: getAddress(row.proposer),
    status: 'active',
    vote_start: Number(row.vote_start),
    vote_end: Number(row.vote_end),
    votes: {
      for: Number(row.for_votes),
      against: Number(row.against_votes),
      abstain: Number(row.abstain_votes),
    },
  }));
}

/** How many votes `voter` cast (the governor's votesCastBy). */
export async function indexedVotesCastBy(sql: Sql, voter: Address): Promise<number> {
  const row = await sql.get<{ n: number | string }>(
    'SELECT COUNT(*) AS n FROM votes WHERE voter = ?',
    voter.toLowerCase(),
  );
  return Number(row?.n ?? 0);
}

/** The AgentPasses `owner` holds, in tokenOfOwnerByIndex's order (chain/agent-wallets.ts). */
export async function indexedAgentPassesOf(sql: Sql, deployment: Deployment, owner: Address) {
  const rows = await sql.all<{ token_id: number | string }>(
    'SELECT token_id FROM agent_passes WHERE owner = ? ORDER BY owner_index',
    owner.toLowerCase(),
  );
  return rows.map((row) => ({
    contract_address: deployment.agent_pass,
    collection_name: 'Agent Pass',
    symbol: 'AGPASS',
    token_id: String(row.token_id),
  }));
}

/**
 * A wallet's ETH, USDC and protocol tokens as of the index's last block `head` (chain/
 * agent-wallets.ts balancesOf): the ETH of its last reading at or below `head` (raw-store.ts),
 * the tokens from their Transfer events. An account the index never saw holds nothing.
 */
export async function indexedBalances(
  sql: Sql,
  deployment: Deployment,
  head: number,
  owner: Address,
): Promise<{ eth: bigint; usdc: bigint; tokens: bigint }> {
  const account = owner.toLowerCase();
  const tokenBalance = async (token: Address) => {
    const row = await sql.get<{ balance: string }>(
      'SELECT balance FROM token_balances WHERE token = ? AND address = ?',
      token.toLowerCase(),
      account,
    );
    return BigInt(row?.balance ?? 0);
  };
  return {
    eth: (await ethBalanceAt(sql, account, head)) ?? 0n,
    usdc: await tokenBalance(deployment.usdc),
    tokens: await tokenBalance(deployment.protocol_token),
  };
}
