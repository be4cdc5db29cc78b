import { closeSync, openSync, writeSync } from 'node:fs';
import { DatabaseSync } from 'node:sqlite';

/**
 * Damages the root pages of `tables` in index.db, where they really are: the write-ahead log
 * is checkpointed into the file first (a running serve may hold it open), and each root page
 * is then overwritten with bytes that are no b-tree page. A running serve reads the file's
 * pages again once the log has changed: a write by another connection does that.
 */
export function damageRootPages(path: string, tables: string[]): void {
  const db = new DatabaseSync(path, { timeout: 5000 });
  for (;;) {
    const done = db.prepare('PRAGMA wal_checkpoint(TRUNCATE)').get() as { busy: number };
    if (done.busy === 0) break;
  }
  const { page_size: pageSize } = db.prepare('PRAGMA page_size').get() as { page_size: number };
  const roots = tables.map(
    (name) =>
      (
        db.prepare('SELECT rootpage FROM sqlite_schema WHERE name = ?').get(name) as {
          rootpage: number;
        }
      ).rootpage,
  );
  const file = openSync(path, 'r+');
  for (const root of roots) {
    writeSync(file, Buffer.alloc(pageSize, 0xa5), 0, pageSize, (Number(root) - 1) * pageSize);
  }
  closeSync(file);
  db.exec("UPDATE index_meta SET value = value WHERE key = 'format'");
  db.close();
}
