import { describe, expect, it } from 'vitest';
import { MIGRATIONS } from '../../src/sandbox/store/migrations.ts';
import {
  checkSteps,
  POSTGRES_SCHEMA_VERSION,
  POSTGRES_STEPS,
  postgresMigration,
  postgresStep,
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
    for (let version = 1; version <= MIGRATIONS.length; version++) {
      const sql = postgresMigration(version);
      expect(sql).not.toMatch(/\bSTRICT\b|\bBLOB\b|\bREAL\b|\bINTEGER\b|\bVIRTUAL\b/);
    }
    expect(postgresMigration(2)).toMatch(/performance_score DOUBLE PRECISION GENERATED ALWAYS/);
    expect(() => postgresMigration(MIGRATIONS.length + 1)).toThrow(/no migration/);
  });

  it("lists each of SQLite's migrations once, in order, among PostgreSQL's own steps", () => {
    expect(() => checkSteps()).not.toThrow();
    const all = MIGRATIONS.map((_, i) => i + 1);
    expect(POSTGRES_SCHEMA_VERSION).toBeGreaterThan(MIGRATIONS.length);
    // A new SQLite migration not appended to PostgreSQL's steps is refused, not skipped.
    expect(() =>
      checkSteps(POSTGRES_STEPS.filter((step) => !('sqlite' in step) || step.sqlite !== 4)),
    ).toThrow(
      `POSTGRES_STEPS lists SQLite's migrations ${all.filter((n) => n !== 4).join(', ')}, not ${all.join(', ')}: append the new one`,
    );
    expect(postgresStep(4)).toBe(postgresMigration(4));
    expect(postgresStep(8)).toMatch(
      /CREATE TABLE chain_checkpoints[\s\S]*CREATE TABLE wallet_mnemonic/,
    );
    expect(postgresStep(9)).toMatch(/CREATE TABLE sandbox_writer/);
    expect(() => postgresStep(POSTGRES_SCHEMA_VERSION + 1)).toThrow(/no PostgreSQL schema version/);
  });

  it('never shows the password of a database URL', () => {
    expect(redactedUrl('postgres://sandbox:s3cret@db.example:5432/team')).toBe(
      'postgres://sandbox:***@db.example:5432/team',
    );
    expect(redactedUrl('postgres://sandbox@db.example/team')).toBe(
      'postgres://sandbox@db.example/team',
    );
    // The driver takes query parameters as settings: a password there is one too.
    const inQuery = redactedUrl(
      'postgres://sandbox@db.example/team?password=s3cret&sslpassword=k3y&sslmode=require',
    );
    expect(inQuery).not.toMatch(/s3cret|k3y/);
    expect(inQuery).toContain('sslmode=require');
  });
});
