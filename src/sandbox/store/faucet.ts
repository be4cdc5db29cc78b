import type { Sql } from './sql.ts';

/** When each agent last received a confirmed faucet drip: the cooldown survives restarts. */
export function createFaucetStore(sql: Sql) {
  return {
    async lastDripAt(agentId: string): Promise<number | undefined> {
      const row = await sql.get<{ last_drip_at: number }>(
        'SELECT last_drip_at FROM faucet_drips WHERE agent_id = ?',
        agentId,
      );
      return row?.last_drip_at;
    },
    async recordDrip(agentId: string, at: number, txHash: string): Promise<void> {
      await sql.run(
        `INSERT INTO faucet_drips (agent_id, last_drip_at, tx_hash) VALUES (?, ?, ?)
         ON CONFLICT (agent_id) DO UPDATE SET last_drip_at = excluded.last_drip_at,
                                              tx_hash = excluded.tx_hash`,
        agentId,
        at,
        txHash,
      );
    },
  };
}
export type FaucetStore = ReturnType<typeof createFaucetStore>;
