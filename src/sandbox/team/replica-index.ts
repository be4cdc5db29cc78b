import pg from 'pg';
import { StartupError } from '../errors.ts';
import {
  connectionFailureReason,
  IndexUnavailableError,
  isConnectionFailure,
} from '../indexer/failure.ts';
import type { IndexReads } from '../indexer/index-reads.ts';
import type { Checkpoint, IndexCommit } from '../indexer/indexer.ts';
import { createDataQueries } from '../indexer/queries.ts';
import { headBlock } from '../indexer/raw-store.ts';
import { hasIndexedActivity, indexTime } from '../indexer/reads.ts';
import { INDEX_SCHEMA } from '../indexer/schema-postgres.ts';
import type { IndexView } from '../indexer/view.ts';
import { numberPlaceholders, postgresTypes, redactedUrl } from '../store/postgres.ts';
import type { Sql, SqlValue } from '../store/sql.ts';
import { commitOf, commitsAfter, lastSeq, oldestSeq } from './commit-feed.ts';
import { type IndexListener, listenIndexed } from './index-notices.ts';

/**
 * A read replica's index: the writer's index on PostgreSQL (its schema, INDEX_SCHEMA), read
 * through a pool of read-only connections, and its commits followed through the commit feed
 * (commit-feed.ts), so that the replica's readers (queries.ts, GraphQL) and subscribers
 * (graphql/publish.ts) work as on the writer, unchanged.
 *
 * - read(): one READ ONLY REPEATABLE READ transaction: every statement of one read sees one
 *   committed state, whatever the writer commits meanwhile.
 * - Commits: on each notice (index-notices.ts) and after each (re)connect of the listener, the
 *   feed's rows after the last one published are read, in batches of `batch`, and each is
 *   published to onCommit's listeners in order, as the IndexCommit the writer's own were told.
 *   When rows were purged past the last one published (the replica fell more than the feed's
 *   bound behind), one reorg-like commit (every vault changed) is published in their place.
 * - version(): the last seq published, plus the number of times the database was lost (what
 *   answer caches kept is dropped then); checkpoint(): the index's last block, read with the
 *   last commits published; failure(): why the database cannot be reached, while it cannot.
 *
 * A replica that restarts starts from the feed's current seq: its subscribers were closed
 * with it, and resubscribe.
 */
export interface ReplicaIndex extends IndexView {
  /**
   * Calls `listener` with each commit published, in the writer's order; answers the
   * unsubscribe. It runs synchronously while the feed is read: it must only schedule work.
   */
  onCommit(listener: (commit: IndexCommit) => void): () => void;
  /**
   * Resolves once the feed has been read up to what was committed when it was called (for
   * tests, and a start that wants the current state published).
   */
  catchUp(): Promise<void>;
  /**
   * Resolves once this replica has published every commit the feed held when it was called
   * (one read of the feed's last seq): a write the writer acknowledged before then (it answers
   * once its block is indexed) is in what the replica reads. Throws IndexUnavailableError
   * after `timeoutMs`, or when the database cannot be reached.
   */
  awaitFeed(timeoutMs: number): Promise<void>;
  /** Resolves once this replica's index is at block `block` at least; as awaitFeed otherwise. */
  awaitBlock(block: number, timeoutMs: number): Promise<void>;
  /** Stops following and closes its connections. */
  close(): Promise<void>;
}

export interface ReplicaIndexOptions {
  /** The sandbox's database (the writer's --database). */
  url: string;
  log: { warn(message: string): void };
  /** Rows of the feed read per transaction (default 500). */
  batch?: number;
  /** Read connections (default 4). */
  connections?: number;
}

/** A connection that cannot be had within this fails the read (the database is unreachable). */
const CONNECT_TIMEOUT_MS = 3000;
/** A statement without an answer within this fails (a network that drops packets silently). */
const QUERY_TIMEOUT_MS = 15_000;
/** A read of the feed that failed is tried again after this (and at each notice). */
const FOLLOW_RETRY_MS = 1000;

/**
 * Whether `error` says the database cannot be reached now: a connection that failed, or a
 * statement the server did not answer within QUERY_TIMEOUT_MS (pg's own query_timeout).
 */
function cannotReach(error: unknown): boolean {
  return isConnectionFailure(error) || (error as Error | null)?.message === 'Query read timeout';
}

/**
 * Opens the replica's view of the index at `options.url` and starts following its commits.
 * Throws a StartupError when the database cannot be read (it names the URL without its
 * password) or holds no index yet (no writer has run on it).
 */
export async function openReplicaIndex(options: ReplicaIndexOptions): Promise<ReplicaIndex> {
  const batch = options.batch ?? 500;
  const where = redactedUrl(options.url);
  const pool = new pg.Pool({
    connectionString: options.url,
    types: postgresTypes,
    max: options.connections ?? 4,
    application_name: 'agentctl replica',
    // Reads only, of the index's tables: a statement that would write is refused by the server.
    options: `-c search_path=${INDEX_SCHEMA} -c default_transaction_read_only=on`,
    connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
    query_timeout: QUERY_TIMEOUT_MS,
    keepAlive: true,
  });
  // An idle connection that fails is dropped by the pool; the next read opens another.
  pool.on('error', () => undefined);

  const listeners = new Set<(commit: IndexCommit) => void>();
  let last = 0;
  let head: Checkpoint | undefined;
  let failure: string | undefined;
  let closed = false;

  /**
   * How many times the database was found unreachable: part of version(), so that what answer
   * caches kept is dropped then (the replica answers 503 while it cannot read, not what it read
   * before). Both parts only grow: the sum never comes back to a value it had.
   */
  let losses = 0;
  const unreachable = (error: unknown): string => {
    if (failure === undefined) losses++;
    failure = `its database cannot be reached (${connectionFailureReason(error)})`;
    return failure;
  };

  /** `work` in one READ ONLY REPEATABLE READ transaction; errors as they come. */
  async function inSnapshot<T>(work: (sql: Sql) => Promise<T>): Promise<T> {
    const client = await pool.connect();
    let broken: Error | undefined;
    // A socket that fails while the client is out of the pool is told here too: its query
    // fails on its own, and the error must not end the process.
    const quiet = (error: Error) => {
      broken ??= error;
    };
    client.on('error', quiet);
    try {
      await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
      const run = async <R>(sql: string, params: SqlValue[]) =>
        (
          await client.query<R & pg.QueryResultRow>({
            text: numberPlaceholders(sql),
            values: params,
          })
        ).rows;
      const result = await work({
        get: async (sql, ...params) => (await run(sql, params))[0] as never,
        all: async (sql, ...params) => (await run(sql, params)) as never,
        run: () => Promise.reject(new Error('a replica reads the index, it never writes it')),
      });
      await client.query('COMMIT');
      return result;
    } catch (error) {
      // A connection that failed is not given back to the pool (nor rolled back: it is gone).
      if (cannotReach(error)) broken ??= error as Error;
      else if (!broken) await client.query('ROLLBACK').catch(() => undefined);
      throw error;
    } finally {
      // A broken one is discarded, and may yet say more.
      if (!broken) client.off('error', quiet);
      client.release(broken);
    }
  }

  /** `reading`'s result; a database that cannot be reached is IndexUnavailableError. */
  async function reached<T>(reading: () => Promise<T>): Promise<T> {
    try {
      const result = await reading();
      failure = undefined;
      return result;
    } catch (error) {
      if (cannotReach(error)) {
        throw new IndexUnavailableError(
          unreachable(error),
          'it answers again once the connection is back',
        );
      }
      throw error;
    }
  }

  const read = <T>(work: (sql: Sql) => Promise<T>): Promise<T> => reached(() => inSnapshot(work));

  function publish(commit: IndexCommit): void {
    for (const listener of listeners) {
      try {
        listener(commit);
      } catch (error) {
        options.log.warn(`a listener of the replica's index failed: ${(error as Error).message}`);
      }
    }
  }

  /** Reads the feed after `last` and publishes it, batch by batch, up to its end. */
  async function follow(): Promise<void> {
    for (;;) {
      if (closed) return;
      const from = last;
      const { oldest, rows, at, vaults } = await inSnapshot(async (sql) => {
        const oldest = await oldestSeq(sql);
        // The rows after `from` were purged: the vaults, to say that every one changed.
        const purged = oldest !== undefined && oldest > from + 1;
        return {
          oldest,
          rows: await commitsAfter(sql, from, batch),
          at: await headBlock(sql),
          vaults: purged
            ? (await sql.all<{ address: string }>('SELECT address FROM vaults')).map(
                (row) => row.address,
              )
            : [],
        };
      });
      failure = undefined;
      if (closed || last !== from) return;
      head = at && Object.freeze(at);
      if (oldest !== undefined && oldest > from + 1) {
        options.log.warn(
          `the replica missed index commits ${from + 1} to ${oldest - 1}, gone from the feed (it keeps the last ones only): its subscribers are told that every vault changed`,
        );
        last = oldest - 1;
        publish({ vaults: new Set(vaults), transactions: [], reorg: true });
      }
      for (const row of rows) {
        last = row.seq;
        publish(commitOf(row));
      }
      if (rows.length < batch) return;
    }
  }

  /**
   * Resolves once `reached()` holds, checked now and at each commit published; the feed is read
   * at once (its notice may be late). Throws IndexUnavailableError after `timeoutMs`.
   */
  function publishedUntil(reached: () => boolean, timeoutMs: number, what: string): Promise<void> {
    if (reached()) return Promise.resolve();
    followSoon().catch(() => undefined);
    return new Promise<void>((resolve, reject) => {
      const check = () => {
        if (!reached()) return;
        clearTimeout(timer);
        listeners.delete(check);
        resolve();
      };
      const timer = setTimeout(() => {
        listeners.delete(check);
        reject(
          new IndexUnavailableError(
            `this replica has not read ${what} within ${timeoutMs} ms`,
            'is its writer running? retry shortly',
          ),
        );
      }, timeoutMs);
      listeners.add(check);
    });
  }

  /** The feed's last seq, in one statement (no transaction: it is one read). */
  const feedHead = (): Promise<number> =>
    reached(async () => {
      const { rows } = await pool.query<{ seq: number | null }>(
        'SELECT max(seq) AS seq FROM index_commits',
      );
      return Number(rows[0]?.seq ?? 0);
    });

  /** One follow at a time; a call while one runs runs once more after it. */
  let following: Promise<void> | undefined;
  let again = false;
  function followSoon(): Promise<void> {
    if (following) {
      again = true;
      return following;
    }
    following = (async () => {
      try {
        do {
          again = false;
          await follow();
        } while (again && !closed);
      } catch (error) {
        if (!cannotReach(error)) {
          options.log.warn(`reading the index's commit feed failed: ${(error as Error).message}`);
        } else {
          unreachable(error);
        }
        // The listener may be fine (a read timed out): the feed is read again, not only at the
        // next notice, which may be long in coming.
        retryLater();
        throw error;
      } finally {
        following = undefined;
      }
    })();
    return following;
  }

  let retry: NodeJS.Timeout | undefined;
  function retryLater(): void {
    if (closed || retry) return;
    retry = setTimeout(() => {
      retry = undefined;
      followSoon().catch(() => undefined);
    }, FOLLOW_RETRY_MS);
  }

  try {
    await inSnapshot(async (sql) => {
      last = await lastSeq(sql);
      const at = await headBlock(sql);
      head = at && Object.freeze(at);
    });
  } catch (error) {
    await pool.end().catch(() => undefined);
    const missing = (error as { code?: string }).code === '42P01';
    throw new StartupError(
      missing
        ? `${where} holds no index (${INDEX_SCHEMA}) with a commit feed: start the writer (serve --database) on it first`
        : `cannot read the index in ${where}: ${(error as Error).message}`,
    );
  }

  // A listening connection that is lost says nothing of reads (it may be that session alone
  // that ended): failure() is what reads find. The reconnect's gap reads what was missed.
  const listener: IndexListener = listenIndexed(options.url, {
    onBlock: () => followSoon(),
    onGap: () => followSoon(),
  });

  return {
    read,
    version: () => last + losses,
    checkpoint: () => head,
    failure: () => failure,
    onCommit(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    async catchUp() {
      // What runs now may have read before the last commit: one more after it.
      await followSoon().catch(() => undefined);
      await followSoon();
    },
    async awaitFeed(timeoutMs) {
      const target = await feedHead();
      await publishedUntil(() => last >= target, timeoutMs, `the index's commit ${target}`);
    },
    awaitBlock(block, timeoutMs) {
      return publishedUntil(
        () => (head?.number ?? 0) >= block,
        timeoutMs,
        `block ${block} of the index`,
      );
    },
    async close() {
      if (closed) return;
      closed = true;
      clearTimeout(retry);
      await listener.close();
      await following?.catch(() => undefined);
      await pool.end().catch(() => undefined);
    },
  };
}

/**
 * What a replica's routes and GraphQL read (IndexReads), over its index: the same queries as
 * the writer's (queries.ts), its commits published from the feed. A replica indexes nothing, so
 * no write waits to be indexed (waitStats: none).
 */
export function replicaIndexReads(
  index: ReplicaIndex,
  deps: Pick<Parameters<typeof createDataQueries>[0], 'chain' | 'store'>,
): IndexReads {
  return {
    view: index,
    queries: createDataQueries({ ...deps, index }),
    failure: () => index.failure(),
    checkpoint: () => index.checkpoint(),
    now: () => indexTime(index),
    version: () => index.version(),
    waitStats: () => ({ writes: 0, p50Ms: null, p99Ms: null }),
    onCommit: (listener) => index.onCommit(listener),
    hasActivity: (address) => index.read((sql) => hasIndexedActivity(sql, address)),
  };
}
