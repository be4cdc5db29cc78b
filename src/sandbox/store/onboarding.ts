import type { Sql } from './sql.ts';

export interface OnboardingRow {
  agent_id: string;
  agent_address: string;
  registered_wallet: string;
  queued_at: number;
}

/** Agents registered whose wallets the chain has not funded yet (an outbox). */
export function createOnboardingStore(sql: Sql) {
  return {
    /** Call inside the transaction that inserts the agent. */
    async enqueue(row: OnboardingRow): Promise<void> {
      await sql.run(
        'INSERT INTO onboarding_queue (agent_id, agent_address, registered_wallet, queued_at) VALUES (?, ?, ?, ?)',
        row.agent_id,
        row.agent_address,
        row.registered_wallet,
        row.queued_at,
      );
    },
    /** Call inside the transaction that logs the onboarding block. */
    async remove(agentIds: string[]): Promise<void> {
      for (const id of agentIds) {
        await sql.run('DELETE FROM onboarding_queue WHERE agent_id = ?', id);
      }
    },
    /** Whether the agent's wallet is still waiting to be funded. */
    async isWaiting(agentId: string): Promise<boolean> {
      return (
        (await sql.get('SELECT agent_id FROM onboarding_queue WHERE agent_id = ?', agentId)) !==
        undefined
      );
    },
    /** The agent still waiting whose agent wallet or registered wallet `address` is, if any. */
    async waitingWallet(address: string): Promise<string | undefined> {
      const lower = address.toLowerCase();
      const row = await sql.get<{ agent_id: string }>(
        `SELECT agent_id FROM onboarding_queue
           WHERE lower(agent_address) = ? OR lower(registered_wallet) = ?`,
        lower,
        lower,
      );
      return row?.agent_id;
    },
    waiting(): Promise<OnboardingRow[]> {
      return sql.all<OnboardingRow>('SELECT * FROM onboarding_queue ORDER BY queued_at, agent_id');
    },
    async count(): Promise<number> {
      const row = await sql.get<{ waiting: number }>(
        'SELECT count(*) AS waiting FROM onboarding_queue',
      );
      return Number(row?.waiting ?? 0);
    },
  };
}
export type OnboardingStore = ReturnType<typeof createOnboardingStore>;
