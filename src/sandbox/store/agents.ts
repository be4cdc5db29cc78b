import type { Tier } from '../../api/schemas/index.ts';
import type { Sql } from './sql.ts';

export interface AgentRow {
  agent_id: string;
  wallet_address: string;
  wallet_key: string;
  agent_name: string;
  agent_type: string;
  description: string | null;
  operator_address: string;
  operator_email: string | null;
  operator_name: string | null;
  framework: string | null;
  repo_url: string | null;
  tier: Tier;
  status: string;
  strategies_submitted: number;
  performance_score: number;
  created_at: number;
  /** HD index of the agent's server-side wallet, and its address (`agent_address`). */
  wallet_index: number;
  agent_address: string;
  deposited_usdc_raw: number;
  votes_cast: number;
}

export type NewAgent = Omit<
  AgentRow,
  'status' | 'strategies_submitted' | 'performance_score' | 'deposited_usdc_raw' | 'votes_cast'
>;

/** Confirmed onchain activity to add to an agent's counters. */
export interface Activity {
  strategies?: number;
  depositedUsdcRaw?: bigint;
  votes?: number;
}

export interface AgentWithKeyPrefix extends AgentRow {
  api_key_prefix: string;
}

/** Moves with every change to an agent row: cached answers built from rows check it. */
export interface AgentChanges {
  count: number;
}

/** Registered agents and their API keys (stored as SHA-256 hashes only). */
export function createAgentStore(sql: Sql, changes: AgentChanges) {
  // Moved before a write and after it: a read made meanwhile is never kept as the new version's
  // (in a transaction, the store moves it again once the transaction ends).
  const changing = async <T>(write: () => Promise<T>): Promise<T> => {
    changes.count++;
    try {
      return await write();
    } finally {
      changes.count++;
    }
  };
  return {
    /** Changes to agent rows so far in this process (a rolled-back one counts too). */
    version: () => changes.count,
    /** Says that every row may have changed (a restore replaced them). */
    replaced(): void {
      changes.count++;
    },
    /** Inserts the agent and its key. Call inside a transaction with the nonce consumption. */
    insert(agent: NewAgent, key: { hash: string; prefix: string }): Promise<void> {
      return changing(async () => {
        await sql.run(
          `INSERT INTO agents (agent_id, wallet_address, wallet_key, agent_name, agent_type, description,
           operator_address, operator_email, operator_name, framework, repo_url, tier, created_at,
           wallet_index, agent_address)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
          agent.agent_id,
          agent.wallet_address,
          agent.wallet_key,
          agent.agent_name,
          agent.agent_type,
          agent.description,
          agent.operator_address,
          agent.operator_email,
          agent.operator_name,
          agent.framework,
          agent.repo_url,
          agent.tier,
          agent.created_at,
          agent.wallet_index,
          agent.agent_address,
        );
        await sql.run(
          'INSERT INTO api_keys (key_hash, key_prefix, agent_id, created_at) VALUES (?, ?, ?, ?)',
          key.hash,
          key.prefix,
          agent.agent_id,
          agent.created_at,
        );
      });
    },
    findByWallet(wallet: string): Promise<AgentWithKeyPrefix | undefined> {
      return sql.get<AgentWithKeyPrefix>(
        `SELECT agents.*, (SELECT key_prefix FROM api_keys WHERE api_keys.agent_id = agents.agent_id
                           ORDER BY created_at DESC LIMIT 1) AS api_key_prefix
         FROM agents WHERE wallet_key = ?`,
        wallet.toLowerCase(),
      );
    },
    /** The agent whose server-side wallet is `address` (EIP-55, as stored). */
    findByAgentAddress(
      address: string,
    ): Promise<Pick<AgentRow, 'agent_id' | 'agent_name' | 'wallet_index'> | undefined> {
      return sql.get(
        'SELECT agent_id, agent_name, wallet_index FROM agents WHERE agent_address = ?',
        address,
      );
    },
    /** Every agent's name by its server-side wallet (the data API's strategy owners). */
    names(): Promise<Array<Pick<AgentRow, 'agent_address' | 'agent_name'>>> {
      return sql.all('SELECT agent_address, agent_name FROM agents');
    },
    /**
     * The hot path of every authenticated request: one query, which also says whether the
     * agent's wallet is still being funded (its row in the onboarding outbox).
     */
    async findByKeyHash(hash: string): Promise<(AgentRow & { funding: boolean }) | undefined> {
      const row = await sql.get<AgentRow & { funding: unknown }>(
        `SELECT agents.*, EXISTS (SELECT 1 FROM onboarding_queue
             WHERE onboarding_queue.agent_id = agents.agent_id) AS funding
           FROM api_keys JOIN agents USING (agent_id) WHERE api_keys.key_hash = ?`,
        hash,
      );
      if (!row) return undefined;
      // SQLite answers EXISTS as 0 or 1, PostgreSQL as a boolean.
      const { funding, ...agent } = row;
      return { ...(agent as AgentRow), funding: funding === true || Number(funding) === 1 };
    },
    async hasAnyApiKey(): Promise<boolean> {
      const row = await sql.get<{ present: number }>(
        'SELECT EXISTS (SELECT 1 FROM api_keys) AS present',
      );
      return Number(row?.present) === 1;
    },
    async hasAny(): Promise<boolean> {
      const row = await sql.get<{ present: number }>(
        'SELECT EXISTS (SELECT 1 FROM agents) AS present',
      );
      return Number(row?.present) === 1;
    },
    async count(): Promise<number> {
      const row = await sql.get<{ agents: number }>('SELECT count(*) AS agents FROM agents');
      return Number(row?.agents ?? 0);
    },
    leaderboard(limit: number) {
      return sql.all<
        Pick<AgentRow, 'agent_name' | 'tier' | 'performance_score' | 'strategies_submitted'>
      >(
        `SELECT agent_name, tier, performance_score, strategies_submitted FROM agents
         ORDER BY performance_score DESC, created_at ASC LIMIT ?`,
        limit,
      );
    },
    async totals() {
      const row = await sql.get<{
        total_agents: number;
        active_agents: number;
        strategies_submitted: number;
      }>(
        `SELECT count(*) AS total_agents,
                count(*) FILTER (WHERE status = 'active') AS active_agents,
                coalesce(sum(strategies_submitted), 0) AS strategies_submitted
         FROM agents`,
      );
      // sum() of a BIGINT is a NUMERIC on PostgreSQL, which pg gives as a string.
      return {
        total_agents: Number(row?.total_agents ?? 0),
        active_agents: Number(row?.active_agents ?? 0),
        strategies_submitted: Number(row?.strategies_submitted ?? 0),
      };
    },
    /** Adds confirmed onchain activity; performance_score follows from the counters. */
    async recordActivity(agentId: string, activity: Activity): Promise<void> {
      await changing(() =>
        sql.run(
          `UPDATE agents SET strategies_submitted = strategies_submitted + ?,
                           deposited_usdc_raw = deposited_usdc_raw + ?,
                           votes_cast = votes_cast + ?
         WHERE agent_id = ?`,
          activity.strategies ?? 0,
          activity.depositedUsdcRaw ?? 0n,
          activity.votes ?? 0,
          agentId,
        ),
      );
    },
    /** Returns false when no agent has that wallet. */
    async setTier(wallet: string, tier: Tier): Promise<boolean> {
      // By the registered wallet or the agent's server-side wallet (an admin call: a scan is fine).
      const { changes: updated } = await changing(() =>
        sql.run(
          'UPDATE agents SET tier = ? WHERE wallet_key = ? OR lower(agent_address) = ?',
          tier,
          wallet.toLowerCase(),
          wallet.toLowerCase(),
        ),
      );
      return updated === 1;
    },
  };
}
export type AgentStore = ReturnType<typeof createAgentStore>;
