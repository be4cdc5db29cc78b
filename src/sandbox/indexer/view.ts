import type { Sql } from '../store/sql.ts';
import type { Checkpoint } from './indexer.ts';

/**
 * The index as its readers see it (queries.ts and the modules it calls, GraphQL, the
 * fulfiller, the wallet allocator): committed rows through the async Sql interface, and what
 * the index says of itself. The writer's indexer implements it over its own database; a
 * replica (issue 25) over the shared PostgreSQL database, following the writer's commits.
 * Readers never see a step's rows before it commits.
 */
export interface IndexView {
  /**
   * Runs `work` against the index's committed rows. Throws IndexUnavailableError (failure.ts)
   * while the index has failed, and when `work` finds its storage failing (which starts a
   * rebuild).
   */
  read<T>(work: (sql: Sql) => Promise<T>): Promise<T>;
  /** A value that changes whenever the index commits anything: what answer caches key on. */
  version(): number;
  /** The last indexed block (kept in memory, so synchronous); undefined while it has failed. */
  checkpoint(): Checkpoint | undefined;
  /** Why the index cannot answer, or undefined when it can. */
  failure(): string | undefined;
}
