import type { Database } from './db.ts';

/** A keyed write's stored answer; see migration 6 for what each column holds. */
export interface IdempotencyRow {
  id: string;
  fingerprint: string;
  status: number;
  answer: Uint8Array;
  created_ms: number;
}

/** The answers of keyed writes (Idempotency-Key), by a hash of the caller's scope and key. */
export function createIdempotencyStore(db: Database) {
  const select = db.prepare(
    'SELECT id, fingerprint, status, answer, created_ms FROM idempotency_keys WHERE id = ?',
  );
  const insert = db.prepare(
    'INSERT INTO idempotency_keys (id, fingerprint, status, answer, created_ms) VALUES (?, ?, ?, ?, ?)',
  );
  const purge = db.prepare('DELETE FROM idempotency_keys WHERE created_ms < ?');
  const count = db.prepare('SELECT count(*) AS n FROM idempotency_keys');
  return {
    find(id: string): IdempotencyRow | undefined {
      return select.get(id) as IdempotencyRow | undefined;
    },
    /** Call inside the transaction that commits the write's own effects. */
    insert(row: IdempotencyRow): void {
      insert.run(row.id, row.fingerprint, row.status, row.answer, row.created_ms);
    },
    /** Deletes the keys made before `beforeMs` (wall clock); returns how many. */
    purge(beforeMs: number): number {
      return Number(purge.run(beforeMs).changes);
    },
    count(): number {
      return Number((count.get() as { n: number }).n);
    },
  };
}
export type IdempotencyStore = ReturnType<typeof createIdempotencyStore>;
