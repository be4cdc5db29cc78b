import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { DatabaseSync } from 'node:sqlite';
import { afterEach, describe, expect, it } from 'vitest';
import { DUE_REQUESTS_SQL, INDEXED_AFTER_SQL } from '../../src/sandbox/indexer/operator-reads.ts';
import {
  USER_POSITIONS_SQL,
  VAULT_STATE_AT_SQL,
  vaultStateAt,
} from '../../src/sandbox/indexer/reads.ts';
import { INDEX_FORMAT, openIndexDatabase } from '../../src/sandbox/indexer/schema.ts';
import { VAULT_SUMMARIES_SQL } from '../../src/sandbox/indexer/vaults.ts';
import type { Sql, SqlValue } from '../../src/sandbox/store/sql.ts';

const VAULT = '0x0763726b9227d70d227b16e79d47542c2194279c';
const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function indexPath(): string {
  const dir = mkdtempSync(join(tmpdir(), 'agentctl-index-'));
  dirs.push(dir);
  return join(dir, 'index.db');
}

/** Stores a state per block: `balance` is the block number, so a read shows which block it saw. */
function addStatesOf(db: DatabaseSync, vault: string, blocks: Array<[number, number]>) {
  const insert = db.prepare(
    `INSERT INTO vault_states (vault, block_number, timestamp, balance, reserved, total_supply, apy_bps, last_accrual)
     VALUES (?, ?, ?, ?, '0', '1000000', 800, ?)`,
  );
  db.exec('BEGIN');
  for (const [block, timestamp] of blocks)
    insert.run(vault, block, timestamp, String(block), timestamp);
  db.exec('COMMIT');
}
const addStates = (db: DatabaseSync, blocks: Array<[number, number]>) =>
  addStatesOf(db, VAULT, blocks);

/** `db` as the readers' Sql (reads only). */
const sqlOf = (db: DatabaseSync): Sql => ({
  get: async <T>(sql: string, ...params: SqlValue[]) => db.prepare(sql).get(...params) as T,
  all: async <T>(sql: string, ...params: SqlValue[]) => db.prepare(sql).all(...params) as T[],
  run: async () => {
    throw new Error('read only');
  },
});

const indexesOf = (db: DatabaseSync, table: string) =>
  (
    db
      .prepare("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = ?")
      .all(table) as Array<{
      name: string;
    }>
  ).map((row) => row.name);

describe('reading a vault’s state at a time', () => {
  it('finds the last block at or before the time, the later of two blocks with one timestamp', async () => {
    const db = openIndexDatabase(indexPath(), 'chain');
    addStates(db, [
      [10, 1000],
      [11, 1000],
      [12, 1012],
      [20, 1100],
    ]);
    expect(await vaultStateAt(sqlOf(db), VAULT, 999)).toBeUndefined();
    expect((await vaultStateAt(sqlOf(db), VAULT, 1000))?.balance).toBe(11n);
    expect((await vaultStateAt(sqlOf(db), VAULT, 1099))?.balance).toBe(12n);
    expect((await vaultStateAt(sqlOf(db), VAULT, 5000))?.balance).toBe(20n);
    db.close();
  });

  it('is one index probe, with no sort of the vault’s history', async () => {
    const db = openIndexDatabase(indexPath(), 'chain');
    addStates(
      db,
      Array.from({ length: 2000 }, (_, i): [number, number] => [i + 1, 1000 + Math.floor(i / 2)]),
    );
    db.exec('ANALYZE');
    const plan = (
      db.prepare(`EXPLAIN QUERY PLAN ${VAULT_STATE_AT_SQL}`).all(VAULT, 1500) as Array<{
        detail: string;
      }>
    ).map((row) => row.detail);
    expect(plan.join('\n')).toMatch(/USING (COVERING )?INDEX vault_states_by_vault_time/);
    expect(plan.join('\n')).not.toMatch(/TEMP B-TREE/);
    // Timestamp 1500 is blocks 1001 and 1002.
    expect((await vaultStateAt(sqlOf(db), VAULT, 1500))?.balance).toBe(1002n);
    db.close();
  });

  it('replaces the older, slower index in an index.db kept from before, without a rebuild', async () => {
    const path = indexPath();
    const old = openIndexDatabase(path, 'chain');
    addStates(old, [[10, 1000]]);
    old.exec(
      'DROP INDEX vault_states_by_vault_time; CREATE INDEX vault_states_by_time ON vault_states (vault, timestamp)',
    );
    old.close();

    const db = openIndexDatabase(path, 'chain');
    expect(indexesOf(db, 'vault_states')).toContain('vault_states_by_vault_time');
    expect(indexesOf(db, 'vault_states')).not.toContain('vault_states_by_time');
    // Same format, same chain: the rows are kept.
    expect(
      (db.prepare("SELECT value FROM index_meta WHERE key = 'format'").get() as { value: string })
        .value,
    ).toBe(INDEX_FORMAT);
    expect((await vaultStateAt(sqlOf(db), VAULT, 1000))?.balance).toBe(10n);
    db.close();
  });
});

describe('reading every vault’s state, or every position’s vault state, at a time', () => {
  it('is one statement: one probe of the index per vault, with no sort of any history', () => {
    const db = openIndexDatabase(indexPath(), 'chain');
    const vaults = ['0x01', '0x02', '0x03'];
    db.exec('BEGIN');
    for (const vault of vaults) {
      db.prepare('INSERT INTO vaults VALUES (?, 1, 1000, NULL)').run(vault);
      db.prepare(
        `INSERT INTO positions VALUES ('0xuser', ?, '1', '1', NULL, '0', '0', '0', '0')`,
      ).run(vault);
    }
    db.exec('COMMIT');
    for (const vault of vaults) {
      addStatesOf(
        db,
        vault,
        Array.from({ length: 2000 }, (_, i): [number, number] => [i + 1, 1000 + i]),
      );
    }
    db.exec('ANALYZE');
    for (const [sql, params] of [
      [VAULT_SUMMARIES_SQL, [1500]],
      [USER_POSITIONS_SQL, [1500, '0xuser']],
    ] as const) {
      const plan = (
        db.prepare(`EXPLAIN QUERY PLAN ${sql}`).all(...params) as Array<{ detail: string }>
      )
        .map((row) => row.detail)
        .join('\n');
      expect(plan).toMatch(
        /SEARCH vault_states USING (COVERING )?INDEX vault_states_by_vault_time/,
      );
      expect(plan).toMatch(
        /SEARCH s USING INDEX sqlite_autoindex_vault_states_1 \(vault=\? AND block_number=\?\)/,
      );
      expect(plan).not.toMatch(/TEMP B-TREE|SCAN vault_states|SCAN s\b/);
      // Each vault's state at 1500 is its block 501's.
      const balances = (db.prepare(sql).all(...params) as Array<{ balance: string }>).map(
        (row) => row.balance,
      );
      expect(balances).toEqual(['501', '501', '501']);
    }
    db.close();
  });
});

describe('the fulfiller’s look for due ERC-7540 requests', () => {
  it('is one range of an index of pending requests, with a limit, however many were fulfilled before', () => {
    const db = openIndexDatabase(indexPath(), 'chain');
    const insert = db.prepare(
      `INSERT INTO transactions (block_number, log_index, hash, type, vault, user_address, amount, shares, status, timestamp, request_id)
       VALUES (?, 0, '0x', 'deposit_request', ?, '0xuser', '1', NULL, ?, ?, ?)`,
    );
    db.exec('BEGIN');
    // 5,000 requests fulfilled long ago (a flood no one claims), then 20 pending.
    for (let i = 1; i <= 5020; i++) {
      insert.run(i, VAULT, i <= 5000 ? 'fulfilled' : 'pending', 1000 + i, String(i));
    }
    db.exec('COMMIT');
    db.exec('ANALYZE');
    const plan = (
      db.prepare(`EXPLAIN QUERY PLAN ${DUE_REQUESTS_SQL}`).all(VAULT, 10_000, 5) as Array<{
        detail: string;
      }>
    )
      .map((row) => row.detail)
      .join('\n');
    expect(plan).toMatch(/USING (COVERING )?INDEX requests_pending_by_time/);
    expect(plan).not.toMatch(/TEMP B-TREE/);
    // Oldest first, at most the limit, and only what is due.
    const due = (dueBy: number, limit: number) =>
      (db.prepare(DUE_REQUESTS_SQL).all(VAULT, dueBy, limit) as Array<{ request_id: string }>).map(
        (row) => row.request_id,
      );
    expect(due(10_000, 5)).toEqual(['5001', '5002', '5003', '5004', '5005']);
    expect(due(1000 + 5002, 100)).toEqual(['5001', '5002']);
    db.close();
  });

  it('looks through newly indexed transactions by a range of their key, with a limit', () => {
    const db = openIndexDatabase(indexPath(), 'chain');
    const plan = (
      db.prepare(`EXPLAIN QUERY PLAN ${INDEXED_AFTER_SQL}`).all(100, 3, 10) as Array<{
        detail: string;
      }>
    )
      .map((row) => row.detail)
      .join('\n');
    expect(plan).toMatch(
      /SEARCH transactions USING INDEX sqlite_autoindex_transactions_1 \(\(block_number,log_index\)>/,
    );
    expect(plan).not.toMatch(/TEMP B-TREE/);
    db.close();
  });
});
