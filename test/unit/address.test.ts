import fc from 'fast-check';
import { getAddress, isAddress } from 'viem';
import { describe, expect, it } from 'vitest';
import { Address, hasValidChecksum } from '../../src/api/schemas/common.ts';

const hex40 = fc.string({
  unit: fc.constantFrom(...'0123456789abcdef'),
  minLength: 40,
  maxLength: 40,
});

describe('EIP-55 checksums', () => {
  it('accepts every checksummed address viem produces', () => {
    fc.assert(
      fc.property(hex40, (hex) => {
        expect(hasValidChecksum(getAddress(`0x${hex}`))).toBe(true);
      }),
    );
  });

  it('agrees with viem on mixed-case addresses, and accepts all-lower and all-upper case', () => {
    fc.assert(
      fc.property(hex40, fc.array(fc.boolean(), { minLength: 40, maxLength: 40 }), (hex, upper) => {
        const mixed = `0x${[...hex].map((c, i) => (upper[i] ? c.toUpperCase() : c)).join('')}`;
        const body = mixed.slice(2);
        if (body === body.toLowerCase() || body === body.toUpperCase()) {
          expect(hasValidChecksum(mixed)).toBe(true);
        } else {
          expect(hasValidChecksum(mixed)).toBe(isAddress(mixed));
        }
      }),
    );
    expect(Address.safeParse(`0x${'AB'.repeat(20)}`).success).toBe(true);
    expect(Address.safeParse('0x52908400098527886E0F7030069857D2E4169EE7').success).toBe(true);
    expect(Address.safeParse('0x52908400098527886E0F7030069857D2E4169Ee7').success).toBe(false);
  });
});
