/**
 * The store's backends, for tests that run the same cases on each (describe.each over
 * STORE_BACKENDS): SQLite in a temporary directory, and PostgreSQL in a fresh database of the
 * run's throwaway cluster (postgres.ts), emptied between cases rather than made anew.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import pg from 'pg';
import { openStore, type Store } from '../../src/sandbox/store/index.ts';
import { MIGRATIONS } from '../../src/sandbox/store/migrations.ts';
import { POSTGRES_SCHEMA_VERSION } from '../../src/sandbox/store/migrations-postgres.ts';
import { openPostgresStore } from '../../src/sandbox/store/postgres.ts';
import { type FreshDatabase, freshDatabase } from './postgres.ts';

export interface StoreBackend {
  name: 'sqlite' | 'postgres';
  /** Once per file (beforeAll). */
  start(): Promise<void>;
  /** Once per file (afterAll): removes what start made. */
  stop(): Promise<void>;
  /** A store on an empty database: nothing a previous case wrote is left. */
  open(): Promise<Store>;
  /** A store on the database of the last open(), as it is (the store before closed). */
  reopen(): Promise<Store>;
  /** The schema version this agentctl brings the backend's database to. */
  schemaVersion: number;
  /** Marks the database of the last open() as made with schema `version` (closed first). */
  setSchemaVersion(version: number): Promise<void>;
}

function sqliteBackend(): StoreBackend {
  const dirs: string[] = [];
  let path = '';
  return {
    name: 'sqlite',
    schemaVersion: MIGRATIONS.length,
    start: async () => undefined,
    async stop() {
      for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
    },
    async open() {
      const dir = mkdtempSync(join(tmpdir(), 'agentctl-store-'));
      dirs.push(dir);
      path = join(dir, 'sandbox.db');
      return openStore(path, { durable: false });
    },
    reopen: async () => openStore(path, { durable: false }),
    async setSchemaVersion(version) {
      const db = new DatabaseSync(path);
      db.exec(`PRAGMA user_version = ${version}`);
      db.close();
    },
  };
}

function postgresBackend(): StoreBackend {
  let database: FreshDatabase | undefined;
  const url = () => (database as FreshDatabase).url;
  async function onDatabase(sql: string): Promise<void> {
    const client = new pg.Client({ connectionString: url() });
    await client.connect();
    try {
      await client.query(sql);
    } finally {
      await client.end();
    }
  }
  return {
    name: 'postgres',
    schemaVersion: POSTGRES_SCHEMA_VERSION,
    async start() {
      database = await freshDatabase();
    },
    stop: async () => database?.drop(),
    async open() {
      const store = await openPostgresStore(url());
      // Every table but the schema's version, emptied: one database serves the whole file.
      await onDatabase(`DO $$ DECLARE tables text; BEGIN
        SELECT string_agg(quote_ident(tablename), ', ') INTO tables FROM pg_tables
          WHERE schemaname = 'public' AND tablename <> 'schema_version';
        EXECUTE 'TRUNCATE ' || tables || ' CASCADE';
      END $$`);
      return store;
    },
    reopen: () => openPostgresStore(url()),
    setSchemaVersion: (version) => onDatabase(`UPDATE schema_version SET version = ${version}`),
  };
}

export const STORE_BACKENDS: ReadonlyArray<() => StoreBackend> = [sqliteBackend, postgresBackend];
