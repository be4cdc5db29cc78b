import { randomBytes } from 'node:crypto';
import { closeSync, copyFileSync, openSync, rmSync } from 'node:fs';
import { DatabaseSync } from 'node:sqlite';
import { migrate, transaction } from './db.ts';
import { MIGRATIONS } from './migrations.ts';

/**
 * Copying a live SQLite database whole, and replacing one's rows with another's: how a
 * snapshot takes sandbox.db and index.db, and how a restore puts sandbox.db back without
 * closing it (every repository keeps its prepared statements).
 */

/**
 * Writes a consistent copy of `db` to `path` (which must not exist) in one statement: the
 * store runs it while no write transaction is open (withWriter), so none can be half in it.
 */
export function copyDatabase(db: DatabaseSync, path: string): void {
  // VACUUM INTO takes an empty file: made first, so that the copy is 0600 (SQLite would
  // follow the umask).
  closeSync(openSync(path, 'wx', 0o600));
  db.prepare('VACUUM INTO ?').run(path);
}

/** Rows a replace keeps as they are: `where` selects them in `table`. */
export interface KeptRows {
  table: string;
  where: string;
  params: string[];
}

/** The database was made by another schema (another agentctl version): its rows cannot be put in. */
export class SchemaMismatchError extends Error {}

/**
 * Replaces every row of `db` with the rows of the database file `from` (every row deleted when
 * `from` is undefined), in one transaction: either all of it is in, or none of it. The tables
 * must be the same, column for column. `kept` rows stay as they are, and are not taken from
 * `from`; `also` runs last in the same transaction (a restore's own answer, put in with it).
 */
export function replaceRows(
  db: DatabaseSync,
  from: string | undefined,
  kept: KeptRows[],
  also: (db: DatabaseSync) => void = () => undefined,
): void {
  const tables = tablesOf(db, 'main');
  if (from !== undefined) db.prepare("ATTACH DATABASE ? AS 'source'").run(from);
  try {
    if (from !== undefined) checkTables(tables, tablesOf(db, 'source'));
    transaction(db, () => {
      // Foreign keys are checked at the commit, when every table is whole again.
      db.exec('PRAGMA defer_foreign_keys = ON');
      for (const name of tables.keys()) {
        const keep = kept.find((rows) => rows.table === name);
        const unkept = keep ? ` WHERE NOT (${keep.where})` : '';
        const params = keep?.params ?? [];
        db.prepare(`DELETE FROM main."${name}"${unkept}`).run(...params);
        if (from !== undefined) {
          const columns = storedColumns(db, name);
          db.prepare(
            `INSERT INTO main."${name}" (${columns}) SELECT ${columns} FROM source."${name}"${unkept}`,
          ).run(...params);
        }
      }
      also(db);
    });
  } finally {
    if (from !== undefined) db.exec('DETACH DATABASE source');
  }
}

/**
 * Throws SchemaMismatchError, saying which table, unless the database file `from` has the
 * tables of `db`, column for column (replaceRows could then put its rows in). Reads only.
 */
export function checkSameTables(db: DatabaseSync, from: string): void {
  db.prepare("ATTACH DATABASE ? AS 'source'").run(from);
  try {
    checkTables(tablesOf(db, 'main'), tablesOf(db, 'source'));
  } finally {
    db.exec('DETACH DATABASE source');
  }
}

function checkTables(ours: Map<string, string>, theirs: Map<string, string>): void {
  const differing = [...ours].filter(([name, sql]) => theirs.get(name) !== sql);
  const extra = [...theirs.keys()].filter((name) => !ours.has(name));
  const first = differing[0]?.[0] ?? extra[0];
  if (first !== undefined) {
    throw new SchemaMismatchError(
      `its table ${first} is not this version's (it was made by another agentctl version)`,
    );
  }
}

/**
 * Runs `use` with the database file `from` at this version's schema: `from` itself when it is
 * at it, else a copy in `workDir` brought up to date by the same migrations a start runs (a
 * snapshot or an export made by an earlier agentctl), removed afterwards. `from` is never
 * changed. A newer schema throws SchemaMismatchError.
 */
export function atThisSchema<T>(from: string, workDir: string, use: (path: string) => T): T {
  const version = schemaVersionOf(from);
  if (version === MIGRATIONS.length) return use(from);
  if (version > MIGRATIONS.length) {
    throw new SchemaMismatchError(
      `is of schema version ${version}, newer than this agentctl knows (${MIGRATIONS.length}): upgrade agentctl`,
    );
  }
  const copy = `${workDir}/upgrading-${randomBytes(8).toString('hex')}.db.tmp`;
  try {
    copyFileSync(from, copy);
    const db = new DatabaseSync(copy);
    try {
      migrate(db);
    } finally {
      db.close();
    }
    return use(copy);
  } finally {
    for (const suffix of ['', '-wal', '-shm', '-journal'])
      rmSync(`${copy}${suffix}`, { force: true });
  }
}

function schemaVersionOf(path: string): number {
  const db = new DatabaseSync(path, { readOnly: true });
  try {
    return (db.prepare('PRAGMA user_version').get() as { user_version: number }).user_version;
  } finally {
    db.close();
  }
}

/** A table's columns but generated ones (which cannot be written), quoted, comma separated. */
function storedColumns(db: DatabaseSync, table: string): string {
  const columns = db
    .prepare('SELECT name, hidden FROM main.pragma_table_xinfo(?)')
    .all(table) as Array<{ name: string; hidden: number }>;
  // hidden: 0 a plain column, 1 a virtual table's hidden one, 2 and 3 generated ones.
  return columns
    .filter((column) => column.hidden === 0)
    .map((column) => `"${column.name}"`)
    .join(', ');
}

/** Each table's name and its CREATE statement (sqlite_sequence included, for AUTOINCREMENT). */
function tablesOf(db: DatabaseSync, schema: 'main' | 'source'): Map<string, string> {
  const rows = db
    .prepare(
      `SELECT name, sql FROM ${schema}.sqlite_schema WHERE type = 'table' AND (name NOT LIKE 'sqlite_%' OR name = 'sqlite_sequence') ORDER BY name`,
    )
    .all() as Array<{ name: string; sql: string }>;
  return new Map(rows.map((row) => [row.name, row.sql]));
}
