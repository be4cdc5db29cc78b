import type { Database } from './db.ts';

/** A keyed write's stored answer; see migration 6 for what each column holds. */
export interface IdempotencyRow {
  id: string;
  scope: string;
  fingerprint: string;
  status: number;
  answer: Uint8Array;
  created_ms: number;
  outlives_restore: 0 | 1;
}

/** The answers of keyed writes (Idempotency-Key), by a hash of the caller's scope and key. */
export function createIdempotencyStore(db: Database) {
  const select = db.prepare('SELECT * FROM idempotency_keys WHERE id = ?');
  // A row already there can only have come back with a restore (a snapshot taken after a
  // keyed restore holds its key): the answer given now is the one to keep.
  const upsert = db.prepare(`
    INSERT INTO idempotency_keys (id, scope, fingerprint, status, answer, created_ms, outlives_restore)
    VALUES (?, ?, ?, ?, ?, ?, ?)
    ON CONFLICT (id) DO UPDATE SET fingerprint = excluded.fingerprint, status = excluded.status,
      answer = excluded.answer, created_ms = excluded.created_ms,
      outlives_restore = excluded.outlives_restore`);
  const purge = db.prepare('DELETE FROM idempotency_keys WHERE created_ms < ?');
  const count = db.prepare('SELECT count(*) AS n FROM idempotency_keys');
  const countOf = db.prepare('SELECT count(*) AS n FROM idempotency_keys WHERE scope = ?');
  return {
    find(id: string): IdempotencyRow | undefined {
      return select.get(id) as IdempotencyRow | undefined;
    },
    /** Call inside the transaction that commits the write's own effects. */
    insert(row: IdempotencyRow): void {
      upsert.run(
        row.id,
        row.scope,
        row.fingerprint,
        row.status,
        row.answer,
        row.created_ms,
        row.outlives_restore,
      );
    },
    /** Deletes the keys made before `beforeMs` (wall clock); returns how many. */
    purge(beforeMs: number): number {
      return Number(purge.run(beforeMs).changes);
    },
    count(): number {
      return Number((count.get() as { n: number }).n);
    },
    /** Keys held for one caller (`scope` as stored: hashed). */
    countOf(scope: string): number {
      return Number((countOf.get(scope) as { n: number }).n);
    },
  };
}
export type IdempotencyStore = ReturnType<typeof createIdempotencyStore>;
