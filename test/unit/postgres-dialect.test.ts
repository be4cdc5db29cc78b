import { describe, expect, it } from 'vitest';
import { MIGRATIONS } from '../../src/sandbox/store/migrations.ts';
import {
  POSTGRES_SCHEMA_VERSION,
  postgresMigration,
} from '../../src/sandbox/store/migrations-postgres.ts';
import { numberPlaceholders, redactedUrl } from '../../src/sandbox/store/postgres.ts';

/** What the PostgreSQL backend changes in SQL written once for both (the store's own tests run it). */
describe('the PostgreSQL dialect', () => {
  it('numbers the placeholders, but not a ? inside a literal, an identifier or a comment', () => {
    expect(
      numberPlaceholders(
        `SELECT '?', 'it''s ?', "a?" FROM t -- why?\n WHERE a = ? AND b IN (?, ?) LIMIT ?`,
      ),
    ).toBe(`SELECT '?', 'it''s ?', "a?" FROM t -- why?\n WHERE a = $1 AND b IN ($2, $3) LIMIT $4`);
  });

  it("translates every migration: no STRICT, BLOB, REAL or SQLite's INTEGER is left", () => {
    for (let version = 1; version <= POSTGRES_SCHEMA_VERSION; version++) {
      const sql = postgresMigration(version);
      expect(sql).not.toMatch(/\bSTRICT\b|\bBLOB\b|\bREAL\b|\bINTEGER\b|\bVIRTUAL\b/);
    }
    expect(postgresMigration(2)).toMatch(/performance_score DOUBLE PRECISION GENERATED ALWAYS/);
    expect(() => postgresMigration(POSTGRES_SCHEMA_VERSION + 1)).toThrow(/no migration/);
  });

  it("adds the tables only PostgreSQL has to their version, past or beside SQLite's", () => {
    expect(POSTGRES_SCHEMA_VERSION).toBeGreaterThanOrEqual(MIGRATIONS.length);
    expect(postgresMigration(7)).toMatch(/CREATE TABLE sandbox_writer/);
  });

  it('never shows the password of a database URL', () => {
    expect(redactedUrl('postgres://sandbox:s3cret@db.example:5432/team')).toBe(
      'postgres://sandbox:***@db.example:5432/team',
    );
    expect(redactedUrl('postgres://sandbox@db.example/team')).toBe(
      'postgres://sandbox@db.example/team',
    );
  });
});
