import { connectionFailureReason } from '../indexer/failure.ts';
import type { Sql } from '../store/sql.ts';

/** Whether the sandbox's PostgreSQL database answers, and why not: /health's `database`. */
export interface DatabaseHealth {
  reachable: boolean;
  reason?: string;
}

/**
 * A probe of the database behind `sql` (a store's `standalone` statements on PostgreSQL, which
 * give up within their own timeout, so that /health never hangs on a database that drops
 * packets): one `SELECT 1`.
 */
export function probeDatabase(sql: Pick<Sql, 'get'>): () => Promise<DatabaseHealth> {
  return async () => {
    try {
      await sql.get('SELECT 1 AS one');
      return { reachable: true };
    } catch (error) {
      return {
        reachable: false,
        reason: `the sandbox's database cannot be reached (${connectionFailureReason(error)})`,
      };
    }
  };
}
