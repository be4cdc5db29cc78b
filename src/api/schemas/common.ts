import { z } from 'zod';
import { hasValidChecksum } from './checksum.ts';

export { checksumAddress, hasValidChecksum } from './checksum.ts';

import { decimalOf, decimalPlaces, exceeds, InexactNumber, plainDecimal } from './numbers.ts';
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
 * Text must be well-formed UTF-16: a lone surrogate has no UTF-8 form, so SQLite and the
 * chain would store U+FFFD in its place while the answer echoed the original.
 */
const LONE_SURROGATE = /\p{Cs}/u;
const WELL_FORMED = {
  error: 'must be well-formed Unicode (it holds a lone surrogate)',
  abort: true,
} as const;

/** A string of `min` to `max` characters, with one message for either bound. */
export const boundedText = (min: number, max: number) => {
  const error = `must be ${min} to ${max} characters`;
  return z
    .string()
    .min(min, { error, abort: true })
    .max(max, { error, abort: true })
    .refine((text) => !LONE_SURROGATE.test(text), WELL_FORMED);
};

/** A string of at most `max` characters. */
export const textUpTo = (max: number) =>
  z
    .string()
    .max(max, { error: `must be at most ${max} characters`, abort: true })
    .refine((text) => !LONE_SURROGATE.test(text), WELL_FORMED);

/**
 * What a name (of an agent, a strategy, an operator, a proposal) may not hold, in the order
 * checked. Names are shown on one line to people who trust them: control characters can
 * break or forge a terminal line, bidi controls can show text in another order than it is
 * stored (as in Trojan Source), and a lone surrogate would be stored as U+FFFD.
 */
const NAME_RULES: [RegExp, string][] = [
  // Blank also when only invisible characters remain (zero-width spaces, Hangul fillers).
  [/^[\s\p{Default_Ignorable_Code_Point}]*$/u, 'must not be blank'],
  [/[\p{Cc}\u2028\u2029]/u, 'must not contain control characters (tabs, line breaks and the like)'],
  [
    /[\u202A-\u202E\u2066-\u2069\u200E\u200F\u061C]/u,
    'must not contain bidirectional control characters (U+202A to U+202E, U+2066 to U+2069, U+200E, U+200F, U+061C)',
  ],
  // Other invisible format characters; the joiners (ZWJ, ZWNJ) are part of emoji and scripts.
  [/(?![\u200C\u200D])\p{Cf}/u, 'must not contain invisible format characters'],
  [LONE_SURROGATE, WELL_FORMED.error],
];

/** Adds NAME_RULES to a string schema; only the first rule that fails is reported. */
export const withNameRules = (text: z.ZodString) =>
  text.superRefine((name, ctx) => {
    const broken = NAME_RULES.find(([pattern]) => pattern.test(name));
    if (broken) ctx.addIssue({ code: 'custom', message: broken[1], input: name });
  });

/** A name of `min` to `max` characters that follows NAME_RULES. */
export const nameText = (min: number, max: number) => withNameRules(boundedText(min, max));

/**
 * A JSON number as the body parser delivers it: a number, or an InexactNumber where a JS
 * number would round it. NaN and ±Infinity (possible from the CLI) are not numbers here.
 */
const jsonNumber = (message: string) =>
  z.custom<number | InexactNumber>(
    (value) =>
      (typeof value === 'number' && Number.isFinite(value)) || value instanceof InexactNumber,
    { error: requiredOr(message) },
  );

/** Ends a transform with one issue. */
function refuse(ctx: z.RefinementCtx, input: unknown, message: string): never {
  ctx.addIssue({ code: 'custom', message, input });
  return z.NEVER;
}

/**
 * An integer from `min` to `max` (at most 2^53 - 1); JSON numbers with a fraction are
 * refused, not rounded. One rule is reported. An integer JSON carries only inexactly
 * (2^53 + 1, 1e400) is beyond any bound here, so it gets the bound's message.
 */
export const boundedInt = (
  min: number,
  max: number,
  messages = { below: `must be ${min} to ${max}`, above: `must be ${min} to ${max}` },
) =>
  jsonNumber('must be an integer').transform((value, ctx): number => {
    const parts = decimalOf(value);
    if (!parts || parts.exponent < 0) return refuse(ctx, value, 'must be an integer');
    if (value instanceof InexactNumber) {
      return refuse(ctx, value, parts.negative ? messages.below : messages.above);
    }
    if (value < min) return refuse(ctx, value, messages.below);
    if (value > max) return refuse(ctx, value, messages.above);
    return value;
  });

/**
 * A positive decimal amount of at most `decimals` places, up to `max`, as exact plain
 * decimal text ("0.0000001", never "1e-7"): it is read from the JSON number's digits, never
 * through floating point. One rule is reported, checked in this order: sign, size, places.
 */
export const decimalAmount = (decimals: number, max: number) =>
  jsonNumber('must be a number').transform((value, ctx): string => {
    const parts = decimalOf(value);
    if (!parts) return refuse(ctx, value, 'must be a number');
    if (parts.negative || parts.digits === '') return refuse(ctx, value, 'must be greater than 0');
    if (exceeds(parts, max)) return refuse(ctx, value, `must be at most ${max}`);
    if (decimalPlaces(parts) > decimals) {
      return refuse(ctx, value, `must have at most ${decimals} decimal places`);
    }
    return plainDecimal(parts);
  });

/**
 * An integer query parameter in plain digits: Number() would also take "0x10", "1e2" and
 * " 5", which nobody writes as a count. Absent or empty (`limit=`) means `fallback`.
 */
export const queryInt = (min: number, max: number, fallback: number) => {
  const range = `must be ${min} to ${max}`;
  return z
    .string({ error: 'must be given once' })
    .regex(/^\d*$/, { error: 'must be plain digits (0-9 only)' })
    .optional()
    .transform((text, ctx): number => {
      const value = text ? Number(text) : fallback;
      return value < min || value > max ? refuse(ctx, text, range) : value;
    });
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
