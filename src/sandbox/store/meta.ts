import type { Sql } from './sql.ts';

/** Small key/value settings that must survive restarts (the clock offset, for one). */
export function createMetaStore(sql: Sql) {
  return {
    async get(key: string): Promise<string | undefined> {
      const row = await sql.get<{ value: string }>('SELECT value FROM meta WHERE key = ?', key);
      return row?.value;
    },
    async set(key: string, value: string): Promise<void> {
      await sql.run(
        'INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value',
        key,
        value,
      );
    },
  };
}
export type MetaStore = ReturnType<typeof createMetaStore>;
