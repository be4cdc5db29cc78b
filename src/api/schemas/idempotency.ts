import { z } from 'zod';

/**
 * `Idempotency-Key` on writes (the IETF draft "The Idempotency-Key HTTP Header Field", as
 * Stripe runs it): a write sent again with the same key is answered with the first answer and
 * not run again. The sandbox honours it on every write; the live service may not, so the CLI
 * retries a write only against a service whose answers showed it honours keys.
 */
export const IDEMPOTENCY_KEY_HEADER = 'idempotency-key';
/** On every answer to a keyed write: `true` when it is the stored answer of an earlier run. */
export const IDEMPOTENT_REPLAYED_HEADER = 'idempotent-replayed';

/** How long a key is kept, at least, in wall-clock time (not sandbox time). */
export const IDEMPOTENCY_RETENTION_SECONDS = 24 * 60 * 60;
/**
 * Keys the sandbox holds at most, and keys one caller (an agent, a wallet; not the admin
 * token) holds at most. Past either (keys newer than the retention), a new key is refused with
 * 429 until older keys expire; writes without a key are not affected.
 */
export const MAX_IDEMPOTENCY_KEYS = 100_000;
export const MAX_IDEMPOTENCY_KEYS_PER_CALLER = 10_000;

export const IdempotencyKey = z
  .string()
  .min(1, 'must be 1 to 255 characters')
  .max(255, 'must be 1 to 255 characters')
  .regex(/^[\x20-\x7e]+$/, 'must be printable ASCII (space to ~)')
  .describe(
    'Makes the write idempotent for 24 hours: the same key with the same body gets the first answer again, with Idempotent-Replayed: true, and runs nothing. Scoped to the caller (the API key, the admin token, or for register the wallet). A UUID v4 is a good key.',
  );

/** The request headers of a write that takes a key (names arrive lower-cased); others pass. */
export const IdempotentWriteHeaders = z.looseObject({
  [IDEMPOTENCY_KEY_HEADER]: IdempotencyKey.optional(),
});
