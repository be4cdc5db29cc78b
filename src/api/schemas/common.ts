import { keccak_256 } from '@noble/hashes/sha3.js';
import { z } from 'zod';
import { TIERS } from './values.ts';

/**
 * Plain-language messages for the failures every schema shares, so both the sandbox's
 * 400s and the CLI's exit-2 messages read the same: "name: is required".
 */
z.config({
  customError: (issue) => {
    if (issue.code !== 'invalid_type') return undefined;
    if (issue.input === undefined) return 'is required';
    const article = /^[aeiou]/.test(issue.expected) ? 'an' : 'a';
    return issue.expected === 'object'
      ? 'must be a JSON object'
      : `must be ${article} ${issue.expected}`;
  },
});

/** A type error that still says "is required" when the field is missing altogether. */
export const requiredOr =
  (message: string) =>
  (issue: { input?: unknown }): string =>
    issue.input === undefined ? 'is required' : message;

/** The protocol's network. The sandbox runs the same chain id locally. */
export const CHAIN_ID = 84532;
export const CHAIN_NAME = 'Base Sepolia';

/**
 * A 20-byte address written as 0x plus 40 hex digits. All-lowercase and
 * all-uppercase forms are accepted; a mixed-case form must carry a valid
 * EIP-55 checksum, which catches most typing mistakes.
 */
export const Address = z
  .string()
  .regex(/^0x[0-9a-fA-F]{40}$/, { error: 'must be 0x followed by 40 hex digits', abort: true })
  .refine(hasValidChecksum, { error: 'has an invalid EIP-55 checksum' });

/**
 * EIP-55: in a mixed-case address, each letter is upper case exactly when the matching
 * nibble of keccak256(lowercase hex) is 8 or more. (Checked here rather than with viem,
 * which would add a quarter of a second to every CLI command that loads the contract.)
 */
export function hasValidChecksum(address: string): address is `0x${string}` {
  const hex = address.slice(2);
  const lower = hex.toLowerCase();
  if (hex === lower || hex === hex.toUpperCase()) return true;
  const hash = keccak_256(new TextEncoder().encode(lower));
  for (let i = 0; i < 40; i++) {
    const char = hex[i] as string;
    if (char >= '0' && char <= '9') continue;
    const nibble = ((hash[i >> 1] as number) >> (i % 2 === 0 ? 4 : 0)) & 0xf;
    if (nibble >= 8 !== (char === char.toUpperCase())) return false;
  }
  return true;
}

/** A string of `min` to `max` characters, with one message for either bound. */
export const boundedText = (min: number, max: number) => {
  const error = `must be ${min} to ${max} characters`;
  return z.string().min(min, { error }).max(max, { error });
};

/** A string of at most `max` characters. */
export const textUpTo = (max: number) =>
  z.string().max(max, { error: `must be at most ${max} characters` });

/** An integer from `min` to `max`; JSON numbers with a fraction are refused, not rounded. */
export const boundedInt = (min: number, max: number) => {
  const error = `must be ${min} to ${max}`;
  return z
    .number({ error: requiredOr('must be an integer') })
    .int({ error: 'must be an integer' })
    .min(min, { error })
    .max(max, { error });
};

export const Tier = z.enum(TIERS);
export type Tier = z.infer<typeof Tier>;

/** True when `tier` is at least `minimum` in the tier order. */
export function tierAtLeast(tier: Tier, minimum: Tier): boolean {
  return TIERS.indexOf(tier) >= TIERS.indexOf(minimum);
}

/** Every non-2xx body. Extra fields (the faucet's cooldown fields, say) are kept. */
export const ErrorBody = z.looseObject({ error: z.string() });
export type ErrorBody = z.infer<typeof ErrorBody>;

/**
 * One readable line from a zod failure: `field: problem; other: problem`.
 * `part` names what was validated (body, querystring) when the whole value is wrong.
 */
export function describeZodError(error: z.ZodError, part = 'input'): string {
  return error.issues
    .map((issue) => {
      const path = issue.path.length > 0 ? issue.path.join('.') : part;
      return `${path}: ${issue.message}`;
    })
    .join('; ');
}
