import type { Sql } from './sql.ts';

export interface NonceRow {
  nonce: string;
  wallet: string;
  domain: string;
  issued_at: number;
  expires_at: number;
  consumed_at: number | null;
}

/** Registration nonces. Rows are kept an hour past expiry so late attempts get a precise error. */
export function createNonceStore(sql: Sql) {
  return {
    async issue(row: Omit<NonceRow, 'consumed_at'>): Promise<void> {
      await sql.run('DELETE FROM nonces WHERE expires_at < ?', row.issued_at - 3600);
      await sql.run(
        'INSERT INTO nonces (nonce, wallet, domain, issued_at, expires_at) VALUES (?, ?, ?, ?, ?)',
        row.nonce,
        row.wallet,
        row.domain,
        row.issued_at,
        row.expires_at,
      );
    },
    find(nonce: string): Promise<NonceRow | undefined> {
      return sql.get<NonceRow>('SELECT * FROM nonces WHERE nonce = ?', nonce);
    },
    /** Marks the nonce used if it is still unused and unexpired; false otherwise. */
    async consume(nonce: string, nowSeconds: number): Promise<boolean> {
      const { changes } = await sql.run(
        'UPDATE nonces SET consumed_at = ? WHERE nonce = ? AND consumed_at IS NULL AND expires_at > ?',
        nowSeconds,
        nonce,
        nowSeconds,
      );
      return changes === 1;
    },
  };
}
export type NonceStore = ReturnType<typeof createNonceStore>;
