import type { DatabaseSync, StatementSync } from 'node:sqlite';
import type { Sql, SqlValue } from '../store/sql.ts';

const cache = new WeakMap<DatabaseSync, Map<string, StatementSync>>();

/**
 * `db.prepare(sql)`, compiled once per database and SQL text: reads run on every request,
 * and compiling a statement costs more than running an indexed one. Read statements only
 * (each SQL text is one of a few fixed ones), and a closed database takes its cache with it.
 */
export function statement(db: DatabaseSync, sql: string): StatementSync {
  let statements = cache.get(db);
  if (!statements) {
    statements = new Map();
    cache.set(db, statements);
  }
  let prepared = statements.get(sql);
  if (!prepared) {
    prepared = db.prepare(sql);
    statements.set(sql, prepared);
  }
  return prepared;
}

/** The most rows one multi-row INSERT carries (far below both backends' parameter limits). */
const ROWS_PER_INSERT = 64;

/**
 * Inserts `rows` with as few statements as the bound allows: `head` is the statement up to
 * VALUES (`INSERT INTO t (a, b) VALUES`), `tail` what follows the rows (an ON CONFLICT). Row
 * counts are written as a sum of powers of two up to ROWS_PER_INSERT, so that only a few SQL
 * texts exist (each is compiled once and cached by its text).
 */
export async function insertRows(
  tx: Sql,
  head: string,
  rows: SqlValue[][],
  tail = '',
): Promise<void> {
  const width = rows[0]?.length ?? 0;
  const row = `(${Array(width).fill('?').join(', ')})`;
  for (let at = 0; at < rows.length; ) {
    let count = ROWS_PER_INSERT;
    while (count > rows.length - at) count /= 2;
    const batch = rows.slice(at, at + count);
    await tx.run(`${head} ${Array(count).fill(row).join(', ')} ${tail}`, ...batch.flat());
    at += count;
  }
}
