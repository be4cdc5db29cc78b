import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { DatabaseSync } from 'node:sqlite';
import { GENESIS_SNAPSHOT } from '../../api/schemas/index.ts';
import { parseCheckpoint } from '../chain/checkpoint.ts';
import { snapshotCheckpoints } from '../chain/checkpoint-store.ts';
import type { DatabaseMnemonicStore, MnemonicStore } from '../chain/mnemonic.ts';
import { META_CHECKPOINT } from '../chain/restore.ts';
import { HttpError, StartupError } from '../errors.ts';
import { openIndexDatabase } from '../indexer/schema.ts';
import { INDEX_SCHEMA, INDEX_TABLES } from '../indexer/schema-postgres.ts';
import { copyDatabase } from '../store/copy.ts';
import { openDatabase } from '../store/db.ts';
import { createIdempotencyStore } from '../store/idempotency.ts';
import { IDENTITY_META, type Store } from '../store/index.ts';
import { POSTGRES_SCHEMA_VERSION } from '../store/migrations-postgres.ts';
import type { Sql, SqlTransaction, SqlValue } from '../store/sql.ts';
import {
  type ExportedFiles,
  exportBytes,
  refuseGenesisExport,
  refuseTooLarge,
  type SandboxExport,
} from './export-file.ts';
import { SNAPSHOT_CHAIN, SNAPSHOT_DB, SNAPSHOT_INDEX, type SnapshotMeta } from './files.ts';
import type { SnapshotStorage, SnapshotWriter } from './storage.ts';

/**
 * Snapshots in the database (`serve --database`, PostgreSQL): each one a schema, snapshot_N,
 * holding a copy of every table of the sandbox's (but those a restore keeps or that are not
 * state: NOT_IN_SNAPSHOTS), of the index's (named index__TABLE), and its chain checkpoint
 * (chain_checkpoints, one row); the `snapshots` table names them (migration step 9).
 *
 * A snapshot is one transaction, opened in the pause in which the chain is dumped and committed
 * once the dump is beside the rows: the schema, the copies (REPEATABLE READ: every table as of
 * one moment; no block is made meanwhile), the copy made a start at its block (its pointer
 * there, its chain log empty, no admin token) and the catalog row, in place of a snapshot of
 * that name. A restore is one transaction as well: the sandbox's rows and the index's replaced
 * by the snapshot's (but the identity, the admin token, the idempotency keys that outlive a
 * restore and the rate counts), its checkpoint made the only one. A crash or a lost connection
 * anywhere leaves the state before or after, never between: nothing is left for a start to
 * finish, and no work schema to tidy (DDL is transactional).
 */

/** Tables of the sandbox's schema a snapshot does not copy, and a restore leaves as they are. */
const NOT_IN_SNAPSHOTS = new Set([
  'schema_version',
  // The catalog itself.
  'snapshots',
  // Its own one (snapshotCheckpoints).
  'chain_checkpoints',
  // The wallets derive from it: one sandbox, one mnemonic, whatever is restored.
  'wallet_mnemonic',
  // A restore takes no counts, and keeps today's (a caller's spent requests are not handed back).
  'rate_counts',
  // Who writes now (the writer lock's row): not state a snapshot holds.
  'sandbox_writer',
]);

/** How an index table is named in a snapshot's schema (beside the sandbox's, whose names differ). */
const INDEX_PREFIX = 'index__';

interface CatalogRow {
  name: string;
  schema_name: string;
  sandbox_id: string;
  block_number: number;
  block_hash: string;
  created_at: number;
  schema_version: number;
  indexed: boolean;
}

export interface DatabaseSnapshotDeps {
  /** The wallet mnemonic an export carries (the database's). */
  mnemonic: MnemonicStore;
  /** The sandbox's store on PostgreSQL: its backend's write connection runs every transaction. */
  store: Store;
  index: {
    /**
     * Whether the index's tables are in the same database (INDEX_SCHEMA): they are then copied
     * and restored in the same transactions; else a restore indexes the chain again.
     */
    inDatabase: boolean;
    /** Runs `work` (which replaces the index's tables) between the index's steps. */
    replacedBy(work: () => Promise<void>): Promise<void>;
    /** Empties the index (it is indexed again from the chain). */
    replaceWith(from: undefined): Promise<void>;
  };
}

export function databaseSnapshots(deps: DatabaseSnapshotDeps): SnapshotStorage {
  const { store, index } = deps;
  const sql = store.sql;

  const catalogRow = (name: string, on: Sql = sql) =>
    on.get<CatalogRow>('SELECT * FROM snapshots WHERE name = ?', name);

  const metaOf = (row: CatalogRow): SnapshotMeta => ({
    format: 1,
    name: row.name,
    sandbox_id: row.sandbox_id,
    block_number: row.block_number,
    block_hash: row.block_hash,
    created_at: row.created_at,
  });

  /** A snapshot that cannot be put in place: why, in a 409. */
  const refuse = (name: string, why: string) =>
    new HttpError(409, `snapshot ${name} cannot be restored: ${why}; nothing was changed`);

  /** Throws refuse's 409 unless snapshot `row`'s tables are this version's, column for column. */
  async function checkReplaceable(row: CatalogRow, on: Sql): Promise<void> {
    if (row.schema_version !== POSTGRES_SCHEMA_VERSION) {
      throw refuse(
        row.name,
        `it was taken at schema version ${row.schema_version}, and this agentctl's is ${POSTGRES_SCHEMA_VERSION} (take it again with this version)`,
      );
    }
    const ours = await columnsOf(on, await storeSchema(on), await storeTables(on));
    const theirs = await columnsOf(on, row.schema_name);
    if (row.indexed && index.inDatabase) {
      const indexColumns = await columnsOf(on, INDEX_SCHEMA, INDEX_TABLES);
      for (const [table, columns] of indexColumns) ours.set(INDEX_PREFIX + table, columns);
    } else {
      for (const table of [...theirs.keys()]) {
        if (table.startsWith(INDEX_PREFIX)) theirs.delete(table);
      }
    }
    theirs.delete('chain_checkpoints');
    const differing = [...ours].find(([table, columns]) => theirs.get(table) !== columns);
    const extra = [...theirs.keys()].find((table) => !ours.has(table));
    const first = differing?.[0] ?? extra;
    if (first !== undefined) {
      throw refuse(row.name, `its table ${first} is not this version's`);
    }
  }

  return {
    async list() {
      const rows = await sql.all<CatalogRow & { size_bytes: number | string }>(
        `SELECT s.*, coalesce((
             SELECT sum(pg_total_relation_size(c.oid))
               FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
              WHERE n.nspname = s.schema_name AND c.relkind = 'r'), 0) AS size_bytes
           FROM snapshots s
          ORDER BY s.created_at, s.name`,
      );
      // One query, sizes included (as schemaSize measures them): a take lists them all.
      return rows.map((row) => ({ ...metaOf(row), size_bytes: Number(row.size_bytes) }));
    },
    async read(name) {
      const row = await catalogRow(name);
      return row && metaOf(row);
    },
    begin: async (name) => databaseWriter(store, index.inDatabase, name),
    // One transaction: never half way.
    unfinished: () => undefined,
    async prepareRestore(name) {
      if (name === GENESIS_SNAPSHOT) return;
      const row = await catalogRow(name);
      if (!row) throw new HttpError(404, `no snapshot is named ${name}`);
      await checkReplaceable(row, sql);
    },
    async putInPlace(name, keys) {
      const replace = () =>
        store.replacedBy(async (tx) => {
          let row: CatalogRow | undefined;
          if (name !== GENESIS_SNAPSHOT) {
            row = await catalogRow(name, tx);
            if (!row) throw new Error(`snapshot ${name} is gone`);
            // Checked again in the transaction: what was checked before may have changed.
            await checkReplaceable(row, tx);
          }
          await replaceRows(tx, row?.schema_name);
          // The restore's own key, with the rows: a retry is answered, never restored again.
          for (const key of keys) await createIdempotencyStore(tx).insert(key);
          await snapshotCheckpoints.replaceWithin(tx, row?.schema_name);
          if (index.inDatabase) {
            await replaceIndexRows(tx, row?.indexed ? row.schema_name : undefined);
          }
        });
      if (index.inDatabase) await index.replacedBy(replace);
      else {
        await replace();
        await index.replaceWith(undefined);
      }
    },
    async remove(name) {
      return sql.transaction(async (tx) => {
        const row = await catalogRow(name, tx);
        if (!row) return false;
        await tx.run(`DROP SCHEMA ${row.schema_name} CASCADE`);
        await tx.run('DELETE FROM snapshots WHERE name = ?', name);
        return true;
      });
    },
    async exportFile(name) {
      refuseGenesisExport(name);
      const row = await catalogRow(name);
      if (!row) throw new HttpError(404, `no snapshot is named ${name}`);
      refuseTooLarge(name, await schemaSize(sql, row.schema_name));
      const mnemonic = await deps.mnemonic.read();
      if (mnemonic === undefined) {
        throw new HttpError(503, 'the wallet mnemonic is missing from the database');
      }
      const chain = await snapshotCheckpoints.read(sql, row.schema_name);
      if (!chain) throw new HttpError(503, `snapshot ${name} has lost its chain checkpoint`);
      const dir = await mkdtemp(join(tmpdir(), 'agentctl-export-'));
      try {
        const files: ExportedFiles = {
          [SNAPSHOT_DB]: await sqliteFile(sql, row.schema_name, dir, 'sandbox', (path) =>
            openDatabase(path, { durable: false }),
          ),
          [SNAPSHOT_CHAIN]: Buffer.from(JSON.stringify(chain)),
        };
        if (row.indexed) {
          const identity = await sql.get<{ value: string }>(
            `SELECT value FROM ${INDEX_SCHEMA}.index_meta WHERE key = 'chain'`,
          );
          files[SNAPSHOT_INDEX] = await sqliteFile(
            sql,
            row.schema_name,
            dir,
            'index',
            (path) => openIndexDatabase(path, identity?.value ?? ''),
            INDEX_PREFIX,
          );
        }
        return exportBytes(metaOf(row), files, mnemonic);
      } finally {
        await rm(dir, { recursive: true, force: true });
      }
    },
  };
}

/**
 * One snapshot's transaction, held open from copyState (in the chain's pause) to commit (once
 * the dump is known): the write connection's turn is held meanwhile, which the pause holds
 * from block commits anyway.
 */
function databaseWriter(store: Store, indexInDatabase: boolean, name: string): SnapshotWriter {
  let held: HeldTransaction | undefined;
  let schema = '';
  let indexed = false;
  return {
    async copyState(at, indexUpToDate) {
      held = await holdTransaction(store);
      const { tx } = held;
      // Every copy as of one moment: the index's tables too, which its own connection writes.
      await tx.run('SET TRANSACTION ISOLATION LEVEL REPEATABLE READ');
      const next = await tx.get<{ n: number | string }>("SELECT nextval('snapshot_schemas') AS n");
      schema = `snapshot_${Number(next?.n)}`;
      await tx.run(`CREATE SCHEMA ${schema}`);
      for (const table of await storeTables(tx)) {
        await tx.run(`CREATE TABLE ${schema}."${table}" AS SELECT * FROM "${table}"`);
      }
      if (indexInDatabase && indexUpToDate) {
        for (const table of INDEX_TABLES) {
          await tx.run(
            `CREATE TABLE ${schema}."${INDEX_PREFIX}${table}" AS SELECT * FROM ${INDEX_SCHEMA}."${table}"`,
          );
        }
        // The copy is the index at the dumped block, or none (indexed again when restored).
        const head = await tx.get<{ hash: string }>(
          `SELECT hash FROM ${schema}.${INDEX_PREFIX}blocks ORDER BY number DESC LIMIT 1`,
        );
        indexed = head?.hash === at.hash;
        if (!indexed) {
          for (const table of INDEX_TABLES) {
            await tx.run(`DROP TABLE ${schema}."${INDEX_PREFIX}${table}"`);
          }
        }
      }
      return indexed;
    },
    async commit(chain, meta) {
      if (!held) throw new Error('the snapshot was not copied');
      const { tx } = held;
      // The copy starts at its block: the chain's dump is its checkpoint, the log is empty.
      await tx.run(
        `DELETE FROM ${schema}.meta WHERE key IN ('admin_token_sha256', ?)`,
        META_CHECKPOINT,
      );
      await tx.run(
        `INSERT INTO ${schema}.meta (key, value) VALUES (?, ?)`,
        META_CHECKPOINT,
        JSON.stringify({ block: chain.block_number, hash: chain.block_hash }),
      );
      await tx.run(`DELETE FROM ${schema}.chain_blocks`);
      await snapshotCheckpoints.copyInto(tx, schema, chain);
      const replaced = await tx.get<{ schema_name: string }>(
        'DELETE FROM snapshots WHERE name = ? RETURNING schema_name',
        name,
      );
      if (replaced) await tx.run(`DROP SCHEMA ${replaced.schema_name} CASCADE`);
      await tx.run(
        `INSERT INTO snapshots (name, schema_name, sandbox_id, block_number, block_hash, created_at,
                                schema_version, indexed)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
        name,
        schema,
        meta.sandbox_id,
        meta.block_number,
        meta.block_hash,
        meta.created_at,
        POSTGRES_SCHEMA_VERSION,
        String(indexed),
      );
      const size = await schemaSize(tx, schema);
      const done = held;
      held = undefined;
      await done.finish(true);
      return size;
    },
    async abandon() {
      const open = held;
      held = undefined;
      await open?.finish(false);
    },
  };
}

interface HeldTransaction {
  tx: SqlTransaction;
  /** Commits (true) or rolls back (false), and resolves once that is done. */
  finish(commit: boolean): Promise<void>;
}

/** Thrown inside a held transaction to roll it back: not an error of anyone's. */
class Abandoned extends Error {}

/**
 * A write transaction of the store's backend opened now and ended by the caller (finish),
 * for work that spans calls (a snapshot's copy, then its commit).
 */
async function holdTransaction(store: Store): Promise<HeldTransaction> {
  let decide!: (commit: boolean) => void;
  const decided = new Promise<boolean>((resolve) => {
    decide = resolve;
  });
  let opened!: (tx: SqlTransaction) => void;
  const ready = new Promise<SqlTransaction>((resolve) => {
    opened = resolve;
  });
  const ended = store.sql.transaction(async (tx) => {
    opened(tx);
    if (!(await decided)) throw new Abandoned();
  });
  const tx = await Promise.race([ready, ended.then(() => undefined)]);
  if (tx === undefined) throw new Error('the transaction ended before it opened');
  return {
    tx,
    async finish(commit) {
      decide(commit);
      try {
        await ended;
      } catch (error) {
        if (!(error instanceof Abandoned)) throw error;
      }
    },
  };
}

/** The bytes snapshot schema `schema`'s tables take. */
async function schemaSize(on: Sql, schema: string): Promise<number> {
  const size = await on.get<{ size: number | string | null }>(
    `SELECT sum(pg_total_relation_size(c.oid)) AS size
       FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE n.nspname = ? AND c.relkind = 'r'`,
    schema,
  );
  return Number(size?.size ?? 0);
}

/**
 * A SQLite file, as a state dir keeps it, holding the rows of snapshot schema `schema`'s
 * tables (named `prefix`TABLE there): `open` makes the file with this version's tables, each
 * of which takes the rows of the schema's table of its name (a table the schema lacks stays
 * empty: the rate counts). Resolves with the file's bytes (one file: VACUUM INTO).
 */
async function sqliteFile(
  on: Sql,
  schema: string,
  dir: string,
  name: string,
  open: (path: string) => DatabaseSync,
  prefix = '',
): Promise<Buffer> {
  const db = open(join(dir, `${name}.work.db`));
  const copy = join(dir, `${name}.db`);
  try {
    const held = new Set((await columnsOf(on, schema)).keys());
    const tables = db
      .prepare(
        "SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name",
      )
      .all() as Array<{ name: string }>;
    db.exec('BEGIN');
    // Foreign keys are checked at the commit, when every table is whole.
    db.exec('PRAGMA defer_foreign_keys = ON');
    for (const { name: table } of tables) {
      if (!held.has(prefix + table)) continue;
      // Stored columns only: SQLite computes its generated ones (hidden 2 and 3).
      const columns = (
        db.prepare('SELECT name, hidden FROM pragma_table_xinfo(?)').all(table) as Array<{
          name: string;
          hidden: number;
        }>
      )
        .filter((column) => column.hidden === 0)
        .map((column) => column.name);
      const quoted = columns.map((column) => `"${column}"`).join(', ');
      const rows = await on.all<Record<string, SqlValue>>(
        `SELECT ${quoted} FROM ${schema}."${prefix}${table}"`,
      );
      // A table the file's opening filled (index_meta's format and chain) is replaced whole.
      db.prepare(`DELETE FROM "${table}"`).run();
      const insert = db.prepare(
        `INSERT INTO "${table}" (${quoted}) VALUES (${columns.map(() => '?').join(', ')})`,
      );
      for (const row of rows) insert.run(...columns.map((column) => row[column] ?? null));
    }
    db.exec('COMMIT');
    copyDatabase(db, copy);
  } finally {
    db.close();
  }
  return readFile(copy);
}

/** The schema the store's tables are in (its connections' search_path: public, normally). */
async function storeSchema(on: Sql): Promise<string> {
  return (
    (await on.get<{ schema: string }>('SELECT current_schema() AS schema'))?.schema ?? 'public'
  );
}

/** The store's tables a snapshot copies: every one of its schema's but NOT_IN_SNAPSHOTS. */
async function storeTables(on: Sql): Promise<string[]> {
  const rows = await on.all<{ table_name: string }>(
    `SELECT c.relname AS table_name
       FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE n.nspname = current_schema() AND c.relkind = 'r'
      ORDER BY c.relname`,
  );
  return rows.map((row) => row.table_name).filter((table) => !NOT_IN_SNAPSHOTS.has(table));
}

/**
 * Each table of `schema` (those of `tables`, when given) with its columns and their types, as
 * one string per table: two tables take the same rows when their strings are equal.
 */
async function columnsOf(
  on: Sql,
  schema: string,
  tables?: readonly string[],
): Promise<Map<string, string>> {
  // pg_catalog, not information_schema: its views open each table (is_updatable), which waits
  // for any lock on it.
  const rows = await on.all<{ table_name: string; column_name: string; data_type: string }>(
    `SELECT c.relname AS table_name, a.attname AS column_name,
            format_type(a.atttypid, a.atttypmod) AS data_type
       FROM pg_attribute a
       JOIN pg_class c ON c.oid = a.attrelid
       JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE n.nspname = ? AND c.relkind = 'r' AND a.attnum > 0 AND NOT a.attisdropped
      ORDER BY c.relname, a.attnum`,
    schema,
  );
  const columns = new Map<string, string[]>();
  for (const row of rows) {
    if (tables && !tables.includes(row.table_name)) continue;
    const list = columns.get(row.table_name) ?? [];
    list.push(`${row.column_name} ${row.data_type}`);
    columns.set(row.table_name, list);
  }
  return new Map([...columns].map(([table, list]) => [table, list.join(', ')]));
}

/** A table's columns that can be written (not generated ones), quoted, comma separated. */
async function writableColumns(on: Sql, schema: string, table: string): Promise<string> {
  const rows = await on.all<{ column_name: string }>(
    `SELECT a.attname AS column_name
       FROM pg_attribute a
       JOIN pg_class c ON c.oid = a.attrelid
       JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE n.nspname = ? AND c.relname = ? AND a.attnum > 0 AND NOT a.attisdropped
        AND a.attgenerated = ''
      ORDER BY a.attnum`,
    schema,
    table,
  );
  return rows.map((row) => `"${row.column_name}"`).join(', ');
}

/**
 * The store's tables in an order their foreign keys allow rows to be inserted in: each after
 * the tables it references.
 */
async function insertOrder(on: Sql, tables: string[]): Promise<string[]> {
  const references = await on.all<{ child: string; parent: string }>(
    `SELECT c.conrelid::regclass::text AS child, c.confrelid::regclass::text AS parent
       FROM pg_constraint c
      WHERE c.contype = 'f' AND c.connamespace = current_schema()::regnamespace`,
  );
  const ordered: string[] = [];
  const visit = (table: string, path: Set<string>) => {
    if (ordered.includes(table) || path.has(table)) return;
    path.add(table);
    for (const { parent } of references.filter((each) => each.child === table)) {
      if (tables.includes(parent)) visit(parent, path);
    }
    ordered.push(table);
  };
  for (const table of tables) visit(table, new Set());
  return ordered;
}

/**
 * Replaces the store's rows with those of snapshot schema `from` (none: genesis), inside `tx`:
 * every table of the snapshot's but the identity's meta keys (while the sandbox has them), the
 * idempotency keys that outlive a restore, and the tables NOT_IN_SNAPSHOTS.
 */
async function replaceRows(tx: SqlTransaction, from: string | undefined): Promise<void> {
  const schema = await storeSchema(tx);
  const tables = await insertOrder(tx, await storeTables(tx));
  const identity = await tx.all<{ key: string }>(
    `SELECT key FROM meta WHERE key IN (${IDENTITY_META.map(() => '?').join(', ')})`,
    ...IDENTITY_META,
  );
  const kept = identity.map((row) => row.key);
  const keptWhere: Record<string, { where: string; params: string[] }> = {
    meta: {
      where: kept.length > 0 ? `key IN (${kept.map(() => '?').join(', ')})` : 'false',
      params: kept,
    },
    // Snapshots and restores are not undone by a restore: nor are their keys.
    idempotency_keys: { where: 'outlives_restore = 1', params: [] },
  };
  // Children before the tables they reference; all at once when nothing of them is kept.
  const whole = tables.filter((table) => keptWhere[table] === undefined);
  if (whole.length > 0) await tx.run(`TRUNCATE ${whole.map((table) => `"${table}"`).join(', ')}`);
  for (const [table, keep] of Object.entries(keptWhere)) {
    if (tables.includes(table)) {
      await tx.run(`DELETE FROM "${table}" WHERE NOT (${keep.where})`, ...keep.params);
    }
  }
  if (from === undefined) return;
  for (const table of tables) {
    const columns = await writableColumns(tx, schema, table);
    const keep = keptWhere[table];
    await tx.run(
      `INSERT INTO "${table}" (${columns}) SELECT ${columns} FROM ${from}."${table}"${keep ? ` WHERE NOT (${keep.where})` : ''}`,
      ...(keep?.params ?? []),
    );
  }
}

/** Replaces the index's rows with snapshot schema `from`'s (none: indexed again from the chain). */
async function replaceIndexRows(tx: SqlTransaction, from: string | undefined): Promise<void> {
  await tx.run(`TRUNCATE ${INDEX_TABLES.map((table) => `${INDEX_SCHEMA}."${table}"`).join(', ')}`);
  if (from === undefined) return;
  for (const table of INDEX_TABLES) {
    await tx.run(
      `INSERT INTO ${INDEX_SCHEMA}."${table}" SELECT * FROM ${from}."${INDEX_PREFIX}${table}"`,
    );
  }
}

/**
 * Makes the new, empty database behind `store` a sandbox that starts as `exported` (checked
 * by readExport; `serve --from FILE --database URL`), in one transaction: its mnemonic sealed
 * in the database (`mnemonic`), the export kept as a snapshot of its name (a schema built from
 * its sandbox.db's rows and its chain, as a take makes one) and put in place as a restore
 * does. An import that fails leaves nothing of it. The index is not taken from it: it is indexed again from the chain at start.
 * A database that holds a sandbox already is refused, unchanged.
 */
export async function importIntoDatabase(
  exported: SandboxExport,
  store: Store,
  mnemonic: DatabaseMnemonicStore,
): Promise<void> {
  const refuse = (why: string) =>
    new StartupError(`--from: ${why}; give --database a new, empty database`);
  const held = await store.sql.get<{ n: number }>(
    `SELECT (SELECT count(*) FROM meta WHERE key = 'sandbox_id')
          + (SELECT count(*) FROM snapshots) + (SELECT count(*) FROM chain_checkpoints) AS n`,
  );
  if (Number(held?.n) > 0) throw refuse('the database holds a sandbox already');
  const chain = parseCheckpoint(
    Buffer.from(exported.files[SNAPSHOT_CHAIN].base64, 'base64').toString('utf8'),
    SNAPSHOT_CHAIN,
    exported.block_number,
  );
  const dir = await mkdtemp(join(tmpdir(), 'agentctl-import-'));
  try {
    const path = join(dir, SNAPSHOT_DB);
    await writeFile(path, Buffer.from(exported.files[SNAPSHOT_DB].base64, 'base64'), {
      mode: 0o600,
    });
    // This version's tables: an export of an earlier agentctl is migrated (its copy here).
    const source = openDatabase(path, { durable: false });
    try {
      await store.sql.transaction(async (tx) => {
        // In this transaction: an import that fails leaves no mnemonic behind.
        if ((await mnemonic.keepWithin(tx, exported.mnemonic)) !== exported.mnemonic) {
          throw refuse('the database holds another wallet mnemonic');
        }
        const next = await tx.get<{ n: number }>("SELECT nextval('snapshot_schemas') AS n");
        const schema = `snapshot_${Number(next?.n)}`;
        await tx.run(`CREATE SCHEMA ${schema}`);
        for (const table of await storeTables(tx)) {
          await tx.run(`CREATE TABLE ${schema}."${table}" (LIKE "${table}")`);
          const columns = (
            await tx.all<{ column_name: string }>(
              `SELECT a.attname AS column_name FROM pg_attribute a
                WHERE a.attrelid = ?::regclass AND a.attnum > 0 AND NOT a.attisdropped
                ORDER BY a.attnum`,
              `${schema}.${table}`,
            )
          ).map((row) => row.column_name);
          const quoted = columns.map((column) => `"${column}"`).join(', ');
          const rows = source.prepare(`SELECT ${quoted} FROM "${table}"`).all() as Array<
            Record<string, SqlValue>
          >;
          for (const row of rows) {
            await tx.run(
              `INSERT INTO ${schema}."${table}" (${quoted}) VALUES (${columns.map(() => '?').join(', ')})`,
              ...columns.map((column) => row[column] ?? null),
            );
          }
        }
        await snapshotCheckpoints.copyInto(tx, schema, chain);
        await tx.run(
          `INSERT INTO snapshots (name, schema_name, sandbox_id, block_number, block_hash,
                                  created_at, schema_version, indexed)
           VALUES (?, ?, ?, ?, ?, ?, ?, 'false')`,
          exported.name,
          schema,
          exported.sandbox_id,
          exported.block_number,
          exported.block_hash,
          exported.created_at,
          POSTGRES_SCHEMA_VERSION,
        );
        await replaceRows(tx, schema);
        await snapshotCheckpoints.replaceWithin(tx, schema);
      });
    } finally {
      source.close();
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
