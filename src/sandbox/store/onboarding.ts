import type { Database } from './db.ts';

export interface OnboardingRow {
  agent_id: string;
  agent_address: string;
  registered_wallet: string;
  queued_at: number;
}

/** Agents registered whose wallets the chain has not funded yet (an outbox). */
export function createOnboardingStore(db: Database) {
  const insert = db.prepare(
    'INSERT INTO onboarding_queue (agent_id, agent_address, registered_wallet, queued_at) VALUES (?, ?, ?, ?)',
  );
  const remove = db.prepare('DELETE FROM onboarding_queue WHERE agent_id = ?');
  const all = db.prepare('SELECT * FROM onboarding_queue ORDER BY queued_at, agent_id');
  const count = db.prepare('SELECT count(*) AS waiting FROM onboarding_queue');
  return {
    /** Call inside the transaction that inserts the agent. */
    enqueue(row: OnboardingRow): void {
      insert.run(row.agent_id, row.agent_address, row.registered_wallet, row.queued_at);
    },
    /** Call inside the transaction that logs the onboarding block. */
    remove(agentIds: string[]): void {
      for (const id of agentIds) remove.run(id);
    },
    waiting(): OnboardingRow[] {
      return all.all() as unknown as OnboardingRow[];
    },
    count(): number {
      return (count.get() as { waiting: number }).waiting;
    },
  };
}
export type OnboardingStore = ReturnType<typeof createOnboardingStore>;
