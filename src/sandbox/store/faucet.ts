import type { Database } from './db.ts';

/** When each agent last received a confirmed faucet drip: the cooldown survives restarts. */
export function createFaucetStore(db: Database) {
  const select = db.prepare('SELECT last_drip_at FROM faucet_drips WHERE agent_id = ?');
  const upsert = db.prepare(`
    INSERT INTO faucet_drips (agent_id, last_drip_at, tx_hash) VALUES (?, ?, ?)
    ON CONFLICT (agent_id) DO UPDATE SET last_drip_at = excluded.last_drip_at,
                                         tx_hash = excluded.tx_hash`);
  return {
    lastDripAt(agentId: string): number | undefined {
      return (select.get(agentId) as { last_drip_at: number } | undefined)?.last_drip_at;
    },
    recordDrip(agentId: string, at: number, txHash: string): void {
      upsert.run(agentId, at, txHash);
    },
  };
}
export type FaucetStore = ReturnType<typeof createFaucetStore>;
