import type { Sql } from './sql.ts';

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

/**
 * Puts a key's row in, or replaces its answer. A row already there can only be the write's own
 * (an answer committed with a restore's rows, then the final one: see snapshots/index.ts) or
 * have come back with a restore (a snapshot taken after a keyed restore holds its key): the
 * answer given now is the one to keep.
 */
export const UPSERT_IDEMPOTENCY_ROW = `INSERT INTO idempotency_keys (id, scope, fingerprint, status, answer, created_ms, outlives_restore)
  VALUES (?, ?, ?, ?, ?, ?, ?)
  ON CONFLICT (id) DO UPDATE SET fingerprint = excluded.fingerprint, status = excluded.status,
    answer = excluded.answer, created_ms = excluded.created_ms,
    outlives_restore = excluded.outlives_restore`;

/** UPSERT_IDEMPOTENCY_ROW's parameters, in order. */
export function idempotencyRowParams(row: IdempotencyRow) {
  return [
    row.id,
    row.scope,
    row.fingerprint,
    row.status,
    row.answer,
    row.created_ms,
    row.outlives_restore,
  ] as const;
}

/** The answers of keyed writes (Idempotency-Key), by a hash of the caller's scope and key. */
export function createIdempotencyStore(sql: Sql) {
  return {
    find(id: string): Promise<IdempotencyRow | undefined> {
      return sql.get<IdempotencyRow>('SELECT * FROM idempotency_keys WHERE id = ?', id);
    },
    /** Call inside the transaction that commits the write's own effects. */
    async insert(row: IdempotencyRow): Promise<void> {
      await sql.run(UPSERT_IDEMPOTENCY_ROW, ...idempotencyRowParams(row));
    },
    /** Deletes the keys made before `beforeMs` (wall clock); returns how many. */
    async purge(beforeMs: number): Promise<number> {
      const { changes } = await sql.run(
        'DELETE FROM idempotency_keys WHERE created_ms < ?',
        beforeMs,
      );
      return changes;
    },
    async count(): Promise<number> {
      const row = await sql.get<{ n: number }>('SELECT count(*) AS n FROM idempotency_keys');
      return Number(row?.n ?? 0);
    },
    /** Keys held for one caller (`scope` as stored: hashed). */
    async countOf(scope: string): Promise<number> {
      const row = await sql.get<{ n: number }>(
        'SELECT count(*) AS n FROM idempotency_keys WHERE scope = ?',
        scope,
      );
      return Number(row?.n ?? 0);
    },
  };
}
export type IdempotencyStore = ReturnType<typeof createIdempotencyStore>;
