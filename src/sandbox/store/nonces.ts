import type { Database } from './db.ts';

export interface NonceRow {
  nonce: string;
  wallet: string;
  domain: string;
  issued_at: number;
  expires_at: number;
  consumed_at: number | null;
}

/** Registration nonces. Rows are kept an hour past expiry so late attempts get a precise error. */
export function createNonceStore(db: Database) {
  const insert = db.prepare(
    'INSERT INTO nonces (nonce, wallet, domain, issued_at, expires_at) VALUES (?, ?, ?, ?, ?)',
  );
  const prune = db.prepare('DELETE FROM nonces WHERE expires_at < ?');
  const select = db.prepare('SELECT * FROM nonces WHERE nonce = ?');
  const consume = db.prepare(
    'UPDATE nonces SET consumed_at = ? WHERE nonce = ? AND consumed_at IS NULL AND expires_at > ?',
  );
  return {
    issue(row: Omit<NonceRow, 'consumed_at'>): void {
      prune.run(row.issued_at - 3600);
      insert.run(row.nonce, row.wallet, row.domain, row.issued_at, row.expires_at);
    },
    find(nonce: string): NonceRow | undefined {
      return select.get(nonce) as NonceRow | undefined;
    },
    /** Marks the nonce used if it is still unused and unexpired; false otherwise. */
    consume(nonce: string, nowSeconds: number): boolean {
      return consume.run(nowSeconds, nonce, nowSeconds).changes === 1;
    },
  };
}
export type NonceStore = ReturnType<typeof createNonceStore>;
