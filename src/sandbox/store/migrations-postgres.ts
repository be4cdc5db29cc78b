import type pg from 'pg';
import { MIGRATIONS, newerSchemaMessage } from './migrations.ts';

/**
 * sandbox.db's migrations on PostgreSQL: MIGRATIONS (SQLite's dialect) translated, entry by
 * entry, so that a migration is written once. What differs between the two dialects is here and
 * only here:
 * - STRICT tables: PostgreSQL's columns are always typed strictly;
 * - INTEGER is SQLite's 64-bit integer: BIGINT (pg gives INT8 back as a string; the backend
 *   parses it to a number, refusing one beyond 2^53 as node:sqlite does);
 * - BLOB is BYTEA, REAL is DOUBLE PRECISION;
 * - TEXT is compared byte by byte (COLLATE "C"), as SQLite's BINARY does: a database made with
 *   a language's collation (en_US.UTF-8, the usual default) would order and compare otherwise;
 * - a generated column is STORED (PostgreSQL before 18 has no VIRTUAL ones); SQLite's real
 *   arithmetic and round() are spelled out (float8, sqlite_round2): PostgreSQL would compute
 *   10.0 * n in NUMERIC, and round a half cent otherwise;
 * - the version is a row of schema_version, not PRAGMA user_version;
 * - some tables are PostgreSQL's alone (POSTGRES_STEPS): what a state dir keeps in files beside
 *   sandbox.db on SQLite (the chain's checkpoints, the wallet mnemonic), a database keeps in
 *   tables. PostgreSQL's versions are therefore its own: POSTGRES_STEPS lists them in order.
 */

/** Rewrites of a whole statement that no word-for-word translation can make, by version. */
const REWRITES: ReadonlyArray<{ version: number; sqlite: string; postgres: string }> = [
  {
    version: 2,
    sqlite: `ALTER TABLE agents ADD COLUMN performance_score REAL GENERATED ALWAYS AS (
    round(10.0 * strategies_submitted + deposited_usdc_raw / 100000000.0 + 5.0 * votes_cast, 2)
  ) VIRTUAL;`,
    // The same doubles as SQLite's (float8 arithmetic in the same order), rounded as SQLite's
    // round() does: by the double's exact value. NUMERIC arithmetic would round 0.015 (a
    // 1.5 USDC deposit) up to 0.02, where SQLite's double, 0.01499…, gives 0.01.
    postgres: `CREATE FUNCTION sqlite_round2(x DOUBLE PRECISION) RETURNS DOUBLE PRECISION
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
    DECLARE
      k INT;
      m NUMERIC;
      unit NUMERIC;
    BEGIN
      -- Under half a cent the answer is 0; from 2^52 up a double holds no fraction.
      IF abs(x) < 0.005 THEN RETURN 0; END IF;
      IF abs(x) >= 4503599627370496 THEN RETURN x; END IF;
      -- The double's exact value is m / 2^k, m an integer: a scale by a power of two is exact
      -- (log2 may be one off either way: 53 leaves room for both).
      k := 53 - floor(log(2, abs(x)::numeric))::INT;
      m := (abs(x) * power(2::float8, k))::BIGINT;
      unit := (1::BIGINT << k)::NUMERIC;
      -- Half a cent away from zero, on that exact value, as SQLite does.
      RETURN sign(x) * (div(200 * m + unit, 2 * unit) / 100)::float8;
    END $$;
  ALTER TABLE agents ADD COLUMN performance_score DOUBLE PRECISION GENERATED ALWAYS AS (
    sqlite_round2(10.0::float8 * strategies_submitted + deposited_usdc_raw / 100000000.0::float8
      + 5.0::float8 * votes_cast)
  ) STORED;`,
  },
];

/** One version of PostgreSQL's schema: SQLite's migration `sqlite`, translated, or its own SQL. */
type PostgresStep = { sqlite: number } | { postgres: string };

/**
 * PostgreSQL's schema, version by version (step N takes it from version N-1 to N): each of
 * SQLite's MIGRATIONS, translated, in their order, and the tables only PostgreSQL has. A new
 * SQLite migration is appended here as well (checkSteps refuses a list that lacks one).
 */
export const POSTGRES_STEPS: readonly PostgresStep[] = [
  { sqlite: 1 },
  { sqlite: 2 },
  { sqlite: 3 },
  { sqlite: 4 },
  { sqlite: 5 },
  { sqlite: 6 },
  { sqlite: 7 },
  // 8: what the state dir keeps beside sandbox.db, for a sandbox kept in the database alone.
  // The chain's checkpoints (chain/checkpoint-N.json on SQLite; chain/checkpoint-store.ts): one
  // row each, at most two at once (the new one, until the pointer has moved to it), anvil's
  // gzipped dump as BYTEA (megabytes; a value may hold 1 GB), stored without TOAST's
  // compression, which gzipped bytes defeat. The wallet mnemonic (wallet.mnemonic on SQLite;
  // chain/mnemonic.ts): one row, sealed with AES-256-GCM under a key derived from
  // AGENTCTL_SANDBOX_SECRET, never the phrase itself.
  {
    postgres: `
  CREATE TABLE chain_checkpoints (
    block_number    BIGINT PRIMARY KEY,
    format          INTEGER NOT NULL,
    sandbox_id      TEXT COLLATE "C" NOT NULL,
    chain_id        BIGINT NOT NULL,
    block_hash      TEXT COLLATE "C" NOT NULL,
    block_timestamp BIGINT NOT NULL,   -- chain Unix seconds
    deployment      TEXT NOT NULL,     -- JSON: the contracts' addresses
    state           BYTEA NOT NULL     -- anvil_dumpState's gzipped JSON
  );
  ALTER TABLE chain_checkpoints ALTER COLUMN state SET STORAGE EXTERNAL;

  CREATE TABLE wallet_mnemonic (
    one        BOOLEAN PRIMARY KEY DEFAULT true CHECK (one),
    scheme     TEXT COLLATE "C" NOT NULL,  -- how it is sealed (sandbox-secret.ts SEAL_SCHEME)
    salt       BYTEA NOT NULL,             -- scrypt's salt
    iv         BYTEA NOT NULL,
    tag        BYTEA NOT NULL,             -- AES-256-GCM's authentication tag
    ciphertext BYTEA NOT NULL
  );
  `,
  },
  // 9: the team sandbox's one writer (team/writer-lock.ts): who holds the writer lock, where it
  // serves (replicas forward writes there), and since when. One row at most: the holder writes
  // it once it has the lock, and a writer that connects again checks it is still its own.
  {
    postgres: `
  CREATE TABLE sandbox_writer (
    one          BOOLEAN PRIMARY KEY DEFAULT true CHECK (one),
    writer_id    TEXT NOT NULL,
    url          TEXT,
    host         TEXT NOT NULL,
    pid          BIGINT NOT NULL,
    started_at   TIMESTAMPTZ NOT NULL,
    last_seen_at TIMESTAMPTZ NOT NULL
  );
  `,
  },
  // 10: the snapshots (snapshots/database.ts), as the state dir keeps them in snapshots/NAME/:
  // each a schema of its own (snapshot_N: a copy of the sandbox's tables, of the index's, and
  // of its chain checkpoint), named here with what it is. schema_version says which tables it
  // holds (a snapshot of another version's is refused at restore); indexed, whether the
  // index's tables were copied (a restore without them indexes the chain again).
  {
    postgres: `
  CREATE SEQUENCE snapshot_schemas;
  CREATE TABLE snapshots (
    name           TEXT COLLATE "C" PRIMARY KEY,
    schema_name    TEXT COLLATE "C" NOT NULL UNIQUE,
    sandbox_id     TEXT COLLATE "C" NOT NULL,
    block_number   BIGINT NOT NULL,
    block_hash     TEXT COLLATE "C" NOT NULL,
    created_at     BIGINT NOT NULL,   -- sandbox time, Unix seconds
    schema_version INTEGER NOT NULL,  -- the sandbox's schema version it was taken at
    indexed        BOOLEAN NOT NULL
  );
  `,
  },
];

/** PostgreSQL's schema version: the last of POSTGRES_STEPS. */
export const POSTGRES_SCHEMA_VERSION = POSTGRES_STEPS.length;

/** Throws unless POSTGRES_STEPS holds each of SQLite's migrations once, in their order. */
export function checkSteps(steps: readonly PostgresStep[] = POSTGRES_STEPS): void {
  const sqlite = steps.flatMap((step) => ('sqlite' in step ? [step.sqlite] : []));
  const expected = MIGRATIONS.map((_, i) => i + 1);
  if (sqlite.join() !== expected.join()) {
    throw new Error(
      `POSTGRES_STEPS lists SQLite's migrations ${sqlite.join(', ')}, not ${expected.join(', ')}: append the new one`,
    );
  }
}

/** PostgreSQL's schema step `version` (1-based), as SQL. */
export function postgresStep(version: number): string {
  const step = POSTGRES_STEPS[version - 1];
  if (step === undefined) throw new Error(`there is no PostgreSQL schema version ${version}`);
  return 'sqlite' in step ? postgresMigration(step.sqlite) : step.postgres;
}

/** SQLite's migration `version` (1-based) in PostgreSQL's dialect. */
export function postgresMigration(version: number): string {
  let sql = MIGRATIONS[version - 1];
  if (sql === undefined) throw new Error(`there is no migration ${version}`);
  for (const rewrite of REWRITES.filter((each) => each.version === version)) {
    // A released migration never changes, so a rewrite that no longer matches is a bug here.
    if (!sql.includes(rewrite.sqlite)) {
      throw new Error(
        `migration ${version} no longer holds the statement rewritten for PostgreSQL`,
      );
    }
    // A function, not a string: `$$` in a replacement string would become `$`.
    sql = sql.replace(rewrite.sqlite, () => rewrite.postgres);
  }
  return sql
    .replace(/\)\s*STRICT\s*;/g, ');')
    .replace(/\bINTEGER\b/g, 'BIGINT')
    .replace(/\bBLOB\b/g, 'BYTEA')
    .replace(/\bREAL\b/g, 'DOUBLE PRECISION')
    .replace(/\bTEXT\b/g, 'TEXT COLLATE "C"');
}

/**
 * An advisory lock key of agentctl's own: two processes that open one database at once migrate
 * it one after the other (the second finds it done).
 */
const MIGRATION_LOCK = 0x61676e74_01;

/**
 * Brings the database's schema up to date, on `client` (outside any transaction): every pending
 * migration and the new version in one transaction (DDL is transactional on PostgreSQL). Throws
 * newerSchemaMessage's words when a newer agentctl made the database.
 */
export async function migratePostgres(client: pg.ClientBase): Promise<void> {
  checkSteps();
  await migrateVersioned(client, {
    lock: MIGRATION_LOCK,
    known: POSTGRES_SCHEMA_VERSION,
    step: postgresStep,
    newer: (version) => newerSchemaMessage(version, POSTGRES_SCHEMA_VERSION),
  });
}

/**
 * Brings one versioned schema up to date on `client` (outside any transaction), in one
 * transaction under the advisory lock `lock`: `prepare` first, then every step past the
 * version its schema_version row says (in the schema `client`'s search_path names), the new
 * version, and `finish` (on the same transaction). Throws `newer`'s words for a schema made by
 * a newer agentctl. The store's schema (above) and the index's (schema-postgres.ts) use it.
 */
export async function migrateVersioned(
  client: pg.ClientBase,
  schema: {
    lock: number;
    /** The version this agentctl brings the schema to (its last step). */
    known: number;
    step(version: number): string;
    newer(version: number): string;
    prepare?: string;
    finish?: () => Promise<void>;
  },
): Promise<void> {
  await client.query('BEGIN');
  try {
    await client.query('SELECT pg_advisory_xact_lock($1)', [schema.lock]);
    if (schema.prepare) await client.query(schema.prepare);
    await client.query(
      `CREATE TABLE IF NOT EXISTS schema_version (
         one     BOOLEAN PRIMARY KEY DEFAULT true CHECK (one),
         version INTEGER NOT NULL
       )`,
    );
    const { rows } = await client.query<{ version: number }>('SELECT version FROM schema_version');
    const current = rows[0]?.version ?? 0;
    if (current > schema.known) throw new Error(schema.newer(current));
    for (let version = current + 1; version <= schema.known; version++) {
      await client.query(schema.step(version));
    }
    if (current < schema.known) {
      await client.query(
        `INSERT INTO schema_version (version) VALUES ($1)
         ON CONFLICT (one) DO UPDATE SET version = excluded.version`,
        [schema.known],
      );
    }
    await schema.finish?.();
    await client.query('COMMIT');
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw error;
  }
}

/**
 * A read replica's check of the database's schema (it migrates nothing: the writer does):
 * throws, saying what to do, unless the schema is this agentctl's version. A database without
 * one holds no sandbox yet; one older was made by an older agentctl (its writer upgrades it
 * when it starts), one newer by a newer agentctl.
 */
export async function checkPostgresSchema(client: pg.ClientBase): Promise<void> {
  const { rows } = await client
    .query<{ version: number }>('SELECT version FROM schema_version')
    .catch((error: { code?: string }) => {
      // 42P01: no schema_version table at all.
      if (error.code === '42P01') return { rows: [] };
      throw error;
    });
  const current = rows[0]?.version;
  if (current === undefined) {
    throw new Error(
      'it holds no sandbox yet: start the writer first (agentctl serve --database URL)',
    );
  }
  if (current > POSTGRES_SCHEMA_VERSION) {
    throw new Error(newerSchemaMessage(current, POSTGRES_SCHEMA_VERSION));
  }
  if (current < POSTGRES_SCHEMA_VERSION) {
    throw new Error(
      `its schema is version ${current}, older than this agentctl's (${POSTGRES_SCHEMA_VERSION}): start the writer with this agentctl first (it upgrades the schema), or run the replica with the writer's agentctl`,
    );
  }
}
