import type { Tier } from '../../api/schemas/index.ts';
import type { Database } from './db.ts';

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

/** Registered agents and their API keys (stored as SHA-256 hashes only). */
export function createAgentStore(db: Database) {
  const insertAgent = db.prepare(`
    INSERT INTO agents (agent_id, wallet_address, wallet_key, agent_name, agent_type, description,
      operator_address, operator_email, operator_name, framework, repo_url, tier, created_at,
      wallet_index, agent_address)
    VALUES (:agent_id, :wallet_address, :wallet_key, :agent_name, :agent_type, :description,
      :operator_address, :operator_email, :operator_name, :framework, :repo_url, :tier, :created_at,
      :wallet_index, :agent_address)`);
  const insertKey = db.prepare(
    'INSERT INTO api_keys (key_hash, key_prefix, agent_id, created_at) VALUES (?, ?, ?, ?)',
  );
  const byWallet = db.prepare(`
    SELECT agents.*, (SELECT key_prefix FROM api_keys WHERE api_keys.agent_id = agents.agent_id
                      ORDER BY created_at DESC LIMIT 1) AS api_key_prefix
    FROM agents WHERE wallet_key = ?`);
  const byAgentAddress = db.prepare(
    'SELECT agent_id, agent_name, wallet_index FROM agents WHERE agent_address = ?',
  );
  const byKeyHash = db.prepare(
    'SELECT agents.* FROM api_keys JOIN agents USING (agent_id) WHERE api_keys.key_hash = ?',
  );
  const anyKey = db.prepare('SELECT EXISTS (SELECT 1 FROM api_keys) AS present');
  const anyAgent = db.prepare('SELECT EXISTS (SELECT 1 FROM agents) AS present');
  const countAll = db.prepare('SELECT count(*) AS agents FROM agents');
  const ranking = db.prepare(`
    SELECT agent_name, tier, performance_score, strategies_submitted FROM agents
    ORDER BY performance_score DESC, created_at ASC LIMIT ?`);
  const totals = db.prepare(`
    SELECT count(*) AS total_agents,
           count(*) FILTER (WHERE status = 'active') AS active_agents,
           coalesce(sum(strategies_submitted), 0) AS strategies_submitted
    FROM agents`);
  // By the registered wallet or the agent's server-side wallet (an admin call: a scan is fine).
  const updateTier = db.prepare(
    'UPDATE agents SET tier = :tier WHERE wallet_key = :wallet OR lower(agent_address) = :wallet',
  );
  const addActivity = db.prepare(`
    UPDATE agents SET strategies_submitted = strategies_submitted + :strategies,
                      deposited_usdc_raw = deposited_usdc_raw + :deposited,
                      votes_cast = votes_cast + :votes
    WHERE agent_id = :agent_id`);

  // Moves with every change to an agent row: cached answers built from rows check it.
  let changes = 0;
  return {
    /** Changes to agent rows so far in this process (a rolled-back one counts too). */
    version: () => changes,
    /** Says that every row may have changed (a restore replaced them). */
    replaced(): void {
      changes++;
    },
    /** Inserts the agent and its key. Call inside a transaction with the nonce consumption. */
    insert(agent: NewAgent, key: { hash: string; prefix: string }): void {
      changes++;
      insertAgent.run({ ...agent });
      insertKey.run(key.hash, key.prefix, agent.agent_id, agent.created_at);
    },
    findByWallet(wallet: string): AgentWithKeyPrefix | undefined {
      return byWallet.get(wallet.toLowerCase()) as AgentWithKeyPrefix | undefined;
    },
    /** The agent whose server-side wallet is `address` (EIP-55, as stored). */
    findByAgentAddress(
      address: string,
    ): Pick<AgentRow, 'agent_id' | 'agent_name' | 'wallet_index'> | undefined {
      return byAgentAddress.get(address) as
        | Pick<AgentRow, 'agent_id' | 'agent_name' | 'wallet_index'>
        | undefined;
    },
    findByKeyHash(hash: string): AgentRow | undefined {
      return byKeyHash.get(hash) as AgentRow | undefined;
    },
    hasAnyApiKey(): boolean {
      return (anyKey.get() as { present: number }).present === 1;
    },
    hasAny(): boolean {
      return (anyAgent.get() as { present: number }).present === 1;
    },
    count(): number {
      return (countAll.get() as { agents: number }).agents;
    },
    leaderboard(limit: number) {
      return ranking.all(limit) as Array<
        Pick<AgentRow, 'agent_name' | 'tier' | 'performance_score' | 'strategies_submitted'>
      >;
    },
    totals() {
      return totals.get() as {
        total_agents: number;
        active_agents: number;
        strategies_submitted: number;
      };
    },
    /** Adds confirmed onchain activity; performance_score follows from the counters. */
    recordActivity(agentId: string, activity: Activity): void {
      changes++;
      addActivity.run({
        agent_id: agentId,
        strategies: activity.strategies ?? 0,
        deposited: activity.depositedUsdcRaw ?? 0n,
        votes: activity.votes ?? 0,
      });
    },
    /** Returns false when no agent has that wallet. */
    setTier(wallet: string, tier: Tier): boolean {
      changes++;
      return updateTier.run({ tier, wallet: wallet.toLowerCase() }).changes === 1;
    },
  };
}
export type AgentStore = ReturnType<typeof createAgentStore>;
