import type { Database } from './db.ts';

/** Small key/value settings that must survive restarts (the clock offset, for one). */
export function createMetaStore(db: Database) {
  const select = db.prepare('SELECT value FROM meta WHERE key = ?');
  const upsert = db.prepare(
    'INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value',
  );
  return {
    get(key: string): string | undefined {
      const row = select.get(key) as { value: string } | undefined;
      return row?.value;
    },
    set(key: string, value: string): void {
      upsert.run(key, value);
    },
  };
}
export type MetaStore = ReturnType<typeof createMetaStore>;
