import type { Checkpoint, IndexCommit } from '../indexer/indexer.ts';
import type { Sql, SqlTransaction } from '../store/sql.ts';
import { announceIndexed } from './index-notices.ts';

/**
 * The index's commit feed, on PostgreSQL: the writer's indexer writes one index_commits row
 * per commit (the index's schema, schema-postgres.ts), inside that commit's transaction, with
 * what its own subscribers are told of it, and announces the row's seq (index-notices.ts:
 * NOTIFY, delivered once the commit is). A replica reads the rows after its last seq on each
 * notice and after each reconnect (NOTIFY may lose messages; a row is never lost), and tells
 * its subscribers the same commits, in the same order (replica-index.ts).
 *
 * Bounded: rows older than the last COMMIT_FEED_KEEP are deleted by the commit that passes
 * them (one range of the primary key, usually one row). A replica that falls further behind
 * than that is told one reorg-like commit (every vault changed) instead of the rows it missed.
 */

/** How many of the last commits the feed keeps. */
export const COMMIT_FEED_KEEP = 10_000;

/** One row of the feed, as it is stored. */
export interface CommitRow {
  seq: number;
  /** The index's last block as of the commit; null while it holds none. */
  block: number | null;
  reorg: boolean;
  /** Lowercase addresses (JSONB: pg hands back the array). */
  vaults: string[];
  transactions: Array<{ blockNumber: number; logIndex: number }>;
  at_ms: number;
}

/**
 * The indexer's afterCommitTx for an index on PostgreSQL (createIndexer's option): records the
 * commit in the feed and announces it, inside the commit's transaction. `fence` (the writer
 * lock's, writer-lock.ts) runs first: a writer that lost the lock commits nothing more, and a
 * new writer's claim waits for the commit.
 *
 * @example
 * createIndexer({
 *   storage: { kind: 'postgres', url },
 *   afterCommitTx: recordCommits({ fence: lock.fence }),
 *   …
 * });
 */
export function recordCommits(
  options: {
    keep?: number;
    now?: () => number;
    fence?: (tx: SqlTransaction) => Promise<void>;
  } = {},
) {
  const keep = options.keep ?? COMMIT_FEED_KEEP;
  const now = options.now ?? Date.now;
  return async (
    tx: SqlTransaction,
    head: Checkpoint | undefined,
    commit: IndexCommit,
  ): Promise<void> => {
    await options.fence?.(tx);
    const row = await tx.get<{ seq: number }>(
      `INSERT INTO index_commits (block, reorg, vaults, transactions, at_ms)
       VALUES (?, ?, ?, ?, ?) RETURNING seq`,
      head?.number ?? null,
      // pg sends a boolean parameter as text; the column takes 'true' / 'false'.
      String(commit.reorg),
      JSON.stringify([...commit.vaults]),
      JSON.stringify(
        commit.transactions.map(({ blockNumber, logIndex }) => ({ blockNumber, logIndex })),
      ),
      now(),
    );
    const seq = (row as { seq: number }).seq;
    await tx.run('DELETE FROM index_commits WHERE seq <= ?', seq - keep);
    await announceIndexed(tx, seq);
  };
}

/** The newest seq of the feed; 0 when it is empty. */
export async function lastSeq(sql: Sql): Promise<number> {
  const row = await sql.get<{ seq: number | null }>('SELECT max(seq) AS seq FROM index_commits');
  return row?.seq ?? 0;
}

/** The oldest seq the feed keeps; undefined when it is empty. */
export async function oldestSeq(sql: Sql): Promise<number | undefined> {
  const row = await sql.get<{ seq: number | null }>('SELECT min(seq) AS seq FROM index_commits');
  return row?.seq ?? undefined;
}

/** The rows after `seq`, oldest first, at most `limit`. */
export function commitsAfter(sql: Sql, seq: number, limit: number): Promise<CommitRow[]> {
  return sql.all<CommitRow>(
    `SELECT seq, block, reorg, vaults, transactions, at_ms FROM index_commits
     WHERE seq > ? ORDER BY seq LIMIT ?`,
    seq,
    limit,
  );
}

/** What a row tells subscribers: the IndexCommit the writer's own were told. */
export function commitOf(row: CommitRow): IndexCommit {
  return {
    vaults: new Set(row.vaults),
    transactions: row.transactions.map(({ blockNumber, logIndex }) => ({ blockNumber, logIndex })),
    reorg: row.reorg,
  };
}
