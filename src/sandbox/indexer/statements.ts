import type { DatabaseSync, StatementSync } from 'node:sqlite';

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
