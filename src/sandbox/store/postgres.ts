import pg from 'pg';
import { StartupError } from '../errors.ts';
import { type BackendSpecifics, createStore } from './index.ts';
import { migratePostgres } from './migrations-postgres.ts';
import type { SqlBackend, SqlTransaction, SqlValue } from './sql.ts';
import type { RecordOutcome } from './types.ts';
import { createWriteTurns, type WhileOpen } from './write-turns.ts';

/**
 * The PostgreSQL implementation of SqlBackend, on `pg`.
 * Writes go through one dedicated connection (`writer`), one transaction at a time (BEGIN …
 * COMMIT under an async lock, as on SQLite): the sandbox is the database's only writer, so
 * READ COMMITTED is enough. Reads made outside a transaction go through a pool of other
 * connections, which see only what is committed.
 * Durability: COMMIT returns once the commit is durable (synchronous_commit, turned back on for
 * the writer's session if the server has it off), so a store on PostgreSQL has nothing to sync.
 *
 * Values: INT8 (BIGINT, count(*)) comes back as a number, and one beyond 2^53 is refused, as
 * node:sqlite does; sum() of a BIGINT is a NUMERIC, a string: the repository converts it.
 * BYTEA comes back as a Buffer (a Uint8Array).
 */

const INT8_OID = 20;

/** How long a standalone statement (a rate count) may wait for a connection, then for its answer. */
export const STANDALONE_TIMEOUT_MS = 2000;

function parseInt8(text: string): number {
  const value = Number(text);
  if (!Number.isSafeInteger(value)) {
    throw new RangeError(`the integer ${text} is beyond what a JavaScript number holds exactly`);
  }
  return value;
}

const types: pg.CustomTypesConfig = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
    oid === INT8_OID && format !== 'binary'
      ? parseInt8
      : pg.types.getTypeParser(oid, format)) as pg.CustomTypesConfig['getTypeParser'],
};

/** The values' parsers, for other connections to the same tables (a replica's reads). */
export { types as postgresTypes };

/**
 * `sql` with its `?` placeholders numbered ($1, $2, …); a `?` inside a string literal, a quoted
 * identifier or a `--` comment stays. Dollar-quoted strings and block comments are not
 * recognised: the repositories write neither.
 */
export function numberPlaceholders(sql: string): string {
  let out = '';
  let n = 0;
  for (let i = 0; i < sql.length; i++) {
    const c = sql[i] as string;
    if (c === "'" || c === '"') {
      // '' (or "") inside is the quote itself: the scan closes and reopens, which copies it.
      const end = sql.indexOf(c, i + 1);
      const stop = end === -1 ? sql.length : end + 1;
      out += sql.slice(i, stop);
      i = stop - 1;
    } else if (c === '-' && sql[i + 1] === '-') {
      const end = sql.indexOf('\n', i);
      const stop = end === -1 ? sql.length : end;
      out += sql.slice(i, stop);
      i = stop - 1;
    } else if (c === '?') {
      out += `$${++n}`;
    } else {
      out += c;
    }
  }
  return out;
}

/**
 * Whether `error` ended the connection it came on: a failure of the socket (not an answer of the
 * server's), or an answer that ends the session (FATAL: terminated, the server shutting down).
 */
function connectionLost(error: unknown): boolean {
  return (
    !(error instanceof pg.DatabaseError) || error.severity === 'FATAL' || error.severity === 'PANIC'
  );
}

/** A URL fit to show: without its password. */
export function redactedUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = '***';
    // The driver takes every query parameter as a setting: ?password=, ?sslpassword= too.
    for (const name of [...parsed.searchParams.keys()]) {
      if (/password/i.test(name)) parsed.searchParams.set(name, '***');
    }
    return parsed.toString();
  } catch {
    return 'the PostgreSQL database (its URL does not parse)';
  }
}

/** What the team sandbox's writer lock (team/writer-lock.ts) adds to a writer's backend. */
export interface WriterHooks {
  /**
   * Runs on each new write connection before anything else runs on it (on the first, before the
   * migrations): throwing refuses the connection, and the write (or the start) that needed it.
   */
  onWriterConnect?(client: pg.ClientBase): Promise<void>;
  /** Runs once the schema is up to date; its writes go through the write connection. */
  onOpen?(backend: SqlBackend): Promise<void>;
}

export interface PostgresBackendOptions extends WriterHooks {
  /**
   * The schema whose tables unqualified names mean (every connection's search_path), for a
   * database shared with other tables (the index's, beside the store's in public).
   */
  schema?: string;
  /** Brings the schema up to date on the writer's connection; default the store's migrations. */
  migrate?: (client: pg.ClientBase) => Promise<void>;
  /**
   * What the connections are named in pg_stat_activity: `agentctl` (the default: `agentctl
   * writer`, `agentctl reader`, `agentctl counts`), or `agentctl replica` for a read replica's,
   * whose "writer" connection only checks the schema.
   */
  applicationName?: string;
}

export async function createPostgresBackend(
  url: string,
  backendOptions: PostgresBackendOptions = {},
): Promise<SqlBackend> {
  const name = backendOptions.applicationName ?? 'agentctl';
  const searchPath = backendOptions.schema && {
    options: `-c search_path=${backendOptions.schema}`,
  };
  // Named, so that pg_stat_activity tells the writer from the readers.
  const pool = new pg.Pool({
    connectionString: url,
    types,
    ...searchPath,
    max: 4,
    application_name: `${name} reader`,
  });
  // An idle connection that fails is dropped by the pool, and the next read opens another:
  // without a listener the error would end the process.
  pool.on('error', () => undefined);
  // The standalone statements' own connections (rate counts): a request's count never waits for
  // the writer's transaction. Their commits need not be durable (a count lost in a crash costs
  // nothing), and a database that cannot be reached fails them within STANDALONE_TIMEOUT_MS.
  const standalonePool = new pg.Pool({
    connectionString: url,
    types,
    max: 2,
    application_name: `${name} counts`,
    connectionTimeoutMillis: STANDALONE_TIMEOUT_MS,
    query_timeout: STANDALONE_TIMEOUT_MS,
    options: '-c synchronous_commit=off',
  });
  standalonePool.on('error', () => undefined);
  const translated = new Map<string, string>();
  const text = (sql: string): string => {
    let numbered = translated.get(sql);
    if (numbered === undefined) {
      numbered = numberPlaceholders(sql);
      translated.set(sql, numbered);
    }
    return numbered;
  };
  const query = <T>(on: pg.ClientBase | pg.Pool, sql: string, params: SqlValue[]) =>
    on.query<T & pg.QueryResultRow>({ text: text(sql), values: params });

  /** The write connection, connected (again, after a failure) on first use. */
  let writer: Promise<pg.Client> | undefined;
  let live: pg.Client | undefined;
  // A closed backend connects no more (a timer's late write would open a session, and hold it).
  let closed = false;
  const writerClient = (): Promise<pg.Client> => {
    if (closed) return Promise.reject(new Error('the store is closed'));
    writer ??= (async () => {
      const client = new pg.Client({
        connectionString: url,
        types,
        ...searchPath,
        application_name: `${name} writer`,
      });
      // A connection that fails or ends is replaced at the next write; the transaction that
      // was running on it fails on its own.
      const forget = () => dropWriter(client);
      client.on('error', forget);
      client.on('end', forget);
      try {
        await client.connect();
        const { rows } = await client.query<{ value: string }>(
          "SELECT current_setting('synchronous_commit') AS value",
        );
        if (rows[0]?.value === 'off') await client.query('SET synchronous_commit = on');
        await backendOptions.onWriterConnect?.(client);
        live = client;
        return client;
      } catch (error) {
        writer = undefined;
        await client.end().catch(() => undefined);
        throw error;
      }
    })();
    return writer;
  };

  /**
   * Forgets the write connection `client` (the next write connects again): its 'error' and
   * 'end' events may come a turn after a query on it failed, too late for the next write.
   */
  const dropWriter = (client: pg.Client): void => {
    if (live !== client) return;
    live = undefined;
    writer = undefined;
    client.end().catch(() => undefined);
  };

  const turns = createWriteTurns();
  let savepoints = 0;

  const transactionOf = (whileOpen: WhileOpen, client: pg.Client): SqlTransaction => {
    const savepoint = async <T>(work: () => Promise<T>): Promise<RecordOutcome<T>> => {
      const name = `record_${++savepoints}`;
      await client.query(`SAVEPOINT ${name}`);
      try {
        const value = await work();
        await client.query(`RELEASE ${name}`);
        return { ok: true, value };
      } catch (error) {
        await client.query(`ROLLBACK TO ${name}`);
        await client.query(`RELEASE ${name}`);
        return { ok: false, error };
      }
    };
    return {
      get: (sql, ...params) =>
        whileOpen(async () => (await query(client, sql, params)).rows[0] as never),
      all: (sql, ...params) =>
        whileOpen(async () => (await query(client, sql, params)).rows as never),
      run: (sql, ...params) =>
        whileOpen(async () => ({ changes: (await query(client, sql, params)).rowCount ?? 0 })),
      savepoint: (work) => whileOpen(() => savepoint(work)),
    };
  };

  try {
    await (backendOptions.migrate ?? migratePostgres)(await writerClient());
  } catch (error) {
    const client = await writer?.catch(() => undefined);
    await client?.end().catch(() => undefined);
    await standalonePool.end().catch(() => undefined);
    await pool.end().catch(() => undefined);
    // A hook's refusal (another writer holds the lock) says what it means already.
    if (error instanceof StartupError) throw error;
    throw new StartupError(`cannot open ${redactedUrl(url)}: ${(error as Error).message}`);
  }

  const backend: SqlBackend = {
    get: async (sql, ...params) => (await query(pool, sql, params)).rows[0] as never,
    all: async (sql, ...params) => (await query(pool, sql, params)).rows as never,
    standalone: {
      get: async (sql, ...params) => (await query(standalonePool, sql, params)).rows[0] as never,
      all: async (sql, ...params) => (await query(standalonePool, sql, params)).rows as never,
      run: async (sql, ...params) => ({
        changes: (await query(standalonePool, sql, params)).rowCount ?? 0,
      }),
    },
    run: (sql, ...params) =>
      turns.exclusive(async () => {
        const client = await writerClient();
        try {
          return { changes: (await query(client, sql, params)).rowCount ?? 0 };
        } catch (error) {
          if (connectionLost(error)) dropWriter(client);
          throw error;
        }
      }),
    transaction<T>(work: (tx: SqlTransaction) => Promise<T>): Promise<T> {
      return turns.transaction(async (whileOpen) => {
        const client = await writerClient();
        try {
          await client.query('BEGIN');
          const result = await work(transactionOf(whileOpen, client));
          const committed = await client.query('COMMIT');
          // PostgreSQL ends a transaction in which a statement failed (and that error was
          // caught) with a ROLLBACK, whatever is asked: the work's rows are not there.
          if (committed.command !== 'COMMIT') {
            throw new Error(
              'the transaction was rolled back: a statement in it failed, which on PostgreSQL ends the transaction (run what may fail on a savepoint)',
            );
          }
          return result;
        } catch (error) {
          // A ROLLBACK that fails says the connection is gone.
          await client.query('ROLLBACK').catch(() => dropWriter(client));
          throw error;
        }
      });
    },
    async close(): Promise<void> {
      await turns.exclusive(async () => {
        closed = true;
        const client = await writer?.catch(() => undefined);
        writer = undefined;
        live = undefined;
        await client?.end().catch(() => undefined);
        await standalonePool.end();
        await pool.end();
      });
    },
  };
  if (backendOptions.onOpen) {
    try {
      await backendOptions.onOpen(backend);
    } catch (error) {
      await backend.close().catch(() => undefined);
      throw error;
    }
  }
  return backend;
}

/** What a store on PostgreSQL does otherwise: its snapshots are schemas (snapshots/database.ts). */
function notOnPostgres(what: string) {
  return (): Promise<never> =>
    Promise.reject(
      new Error(
        `${what} is SQLite's: on PostgreSQL a snapshot is a schema (snapshots/database.ts)`,
      ),
    );
}

/**
 * The sandbox's off-chain state in the PostgreSQL database at `url` (created tables, migrated):
 * the same Store as openStore's, but for the copies of SQLite files (copyTo, replaceFrom,
 * checkReplaceable), which reject: snapshots there are schemas of the database
 * (snapshots/database.ts, through `sql` and replacedBy). `sql` is its backend, for what keeps
 * tables of its own in the same database (the chain's checkpoints: databaseCheckpoints; the
 * wallet mnemonic: databaseMnemonic; the snapshots). Throws a StartupError that names the
 * database (without its password). A read replica gives `migrate: checkPostgresSchema`: it
 * changes no table, and refuses a schema that is not this agentctl's.
 */
export async function openPostgresStore(url: string, options: PostgresBackendOptions = {}) {
  const backend = await createPostgresBackend(url, options);
  const specifics: BackendSpecifics = {
    kind: 'postgres',
    // COMMIT returned: the commit is durable.
    sync: () => Promise.resolve(),
    copyTo: notOnPostgres('copying the database file'),
    replaceFrom: notOnPostgres('replacing the rows with a database file’s'),
    checkReplaceable: notOnPostgres('checking a database file'),
    close: async () => undefined,
  };
  return createStore(backend, specifics);
}
