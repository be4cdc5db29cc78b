import { buildSchema, parse, specifiedRules, validate } from 'graphql';
import { describe, expect, it } from 'vitest';
import { GRAPHQL_LIMITS } from '../../src/api/schemas/index.ts';
import { DataApiError } from '../../src/sandbox/errors.ts';
import { limitsRule } from '../../src/sandbox/graphql/limits.ts';
import { SCHEMA_SDL } from '../../src/sandbox/graphql/schema.ts';

/**
 * The limits rule alone (a pure unit: its index is a stand-in). Causing a failed index.db on a
 * real serve is test/cli/data-index.test.ts's; here only the rule's answer to one is checked.
 */
describe('the limits rule while the index is unavailable', () => {
  it('answers vaultHistory’s cost with an INDEX_UNAVAILABLE error instead of throwing out of validation', () => {
    const unavailable = {
      now: () => 0,
      createdAt: (): number[] => {
        throw new DataApiError('INDEX_UNAVAILABLE', 'index.db failed (test)');
      },
    };
    const schema = buildSchema(SCHEMA_SDL);
    // A subscribe's document may hold a query too: the rule measures every operation.
    const document = parse(
      'subscription S { transactionCreated { hash } } query Q { vaultHistory(address: "0x01", period: ALL, interval: DAY) { tvl } }',
    );
    const errors = validate(schema, document, [
      ...specifiedRules,
      limitsRule(GRAPHQL_LIMITS, unavailable),
    ]);
    expect(errors.map((error) => error.extensions.code)).toEqual(['INDEX_UNAVAILABLE']);
    expect(errors[0]?.message).toMatch(/index\.db failed/);
  });
});
