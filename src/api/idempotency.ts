/**
 * Writes with an `Idempotency-Key` (the IETF draft "The Idempotency-Key HTTP Header Field",
 * as Stripe does it): what a key may be, and when a write may be sent again. Pure: the client
 * (client.ts) does the sending and the waiting.
 *
 * A write is sent again only to a service that has shown it honours keys (an answer to a keyed
 * write carried `Idempotent-Replayed`): one that ignores the header would carry it out twice.
 */

/** Tries of one write against a service that honours keys, the first included. */
export const WRITE_ATTEMPTS = 4;
/** A Retry-After longer than this is not waited out by a write: its error is said at once. */
export const MAX_WRITE_RETRY_AFTER_MS = 10_000;
const MIN_RETRY_WAIT_MS = 100;
const MAX_BACKOFF_MS = 4_000;

/** What the service's contract takes: 1 to 255 printable ASCII characters (0x20-0x7E). */
export function isValidIdempotencyKey(key: string): boolean {
  return /^[\x20-\x7e]{1,255}$/.test(key);
}

/**
 * Why a key is refused, in the words every usage error uses; undefined when it is fine. Stricter
 * than the contract by one rule: HTTP drops a header value's outer spaces, so the service would
 * take " k" for "k" (another command's key, perhaps) and a key of spaces for an empty one.
 */
export function idempotencyKeyProblem(key: string): string | undefined {
  if (key.length === 0) return 'must not be empty';
  if (key.length > 255) return `must be at most 255 characters (it has ${key.length})`;
  if (!isValidIdempotencyKey(key)) {
    return 'must be printable ASCII characters only (letters, digits, punctuation, spaces)';
  }
  if (key.startsWith(' ') || key.endsWith(' ')) {
    return 'must not begin or end with a space (HTTP drops them: the service would see another key)';
  }
  return undefined;
}

/** A fresh key for one write: a UUID v4. */
export function newIdempotencyKey(): string {
  return globalThis.crypto.randomUUID();
}

/** Where a service's honouring of keys is remembered: scheme://host:port. */
export function originOf(url: string): string {
  const parsed = new URL(url);
  const port = parsed.port || (parsed.protocol === 'https:' ? '443' : '80');
  return `${parsed.protocol}//${parsed.hostname}:${port}`;
}

/** Exponential backoff with full jitter: a random wait up to 250 ms × 2^attempt, capped. */
export function backoff(attempt: number, random: () => number = Math.random): number {
  return Math.round(random() * Math.min(MAX_BACKOFF_MS, 250 * 2 ** attempt));
}

/** How one try of a write ended, as far as deciding what comes next is concerned. */
export type WriteTry =
  /** Nothing reached the service (refused, unknown host, timed out connecting). */
  | { kind: 'not-sent'; transient: boolean }
  /** Sent, and the connection went away or the answer did not come in time. */
  | { kind: 'lost' }
  /** An answer with a status other than 2xx. */
  | {
      kind: 'status';
      status: number;
      retryAfterMs: number | undefined;
      /**
       * An answer that will not change by waiting: the write's kept outcome (it carried
       * Idempotent-Replayed), the faucet's cooldown, no API keys.
       */
      final: boolean;
    };

/**
 * What follows a try that did not succeed: another try after `waitMs`, or the end. `unknown`
 * says whether the write may have taken effect (the caller cannot tell), should it end there.
 */
export type WriteDecision = { unknown: boolean } & (
  | { retry: true; waitMs: number }
  | { retry: false }
);

/**
 * After try number `attempt` (0 for the first) of a write: against a service known to honour
 * keys, a lost answer, a 5xx, a 409 that says to come back (Retry-After: the same key still
 * running) and a 429 are tried again, up to WRITE_ATTEMPTS tries, after a jittered backoff
 * (never sooner than Retry-After). Against any other service, never: one try only.
 *
 * A 409 without Retry-After is the service's own conflict (a wallet registered already), which
 * waiting does not change. A 429 means the write did not run, so giving up on it is not unknown.
 */
export function decideAfterWrite(
  tried: WriteTry,
  attempt: number,
  honoursKeys: boolean,
  random: () => number = Math.random,
): WriteDecision {
  const unknown = mayHaveRun(tried);
  const retryable =
    tried.kind === 'not-sent'
      ? tried.transient
      : tried.kind === 'lost' ||
        (!tried.final &&
          (tried.status >= 500 ||
            tried.status === 429 ||
            (tried.status === 409 && tried.retryAfterMs !== undefined)));
  if (!honoursKeys || !retryable || attempt + 1 >= WRITE_ATTEMPTS) {
    return { retry: false, unknown };
  }
  const retryAfterMs = tried.kind === 'status' ? (tried.retryAfterMs ?? 0) : 0;
  if (retryAfterMs > MAX_WRITE_RETRY_AFTER_MS) return { retry: false, unknown };
  return {
    retry: true,
    waitMs: Math.max(retryAfterMs, backoff(attempt, random), MIN_RETRY_WAIT_MS),
    unknown,
  };
}

/**
 * Whether a write that ended so may have taken effect: its answer was lost, the service failed
 * (5xx), or the same key was still running (409 with Retry-After).
 */
function mayHaveRun(tried: WriteTry): boolean {
  if (tried.kind === 'lost') return true;
  if (tried.kind === 'not-sent' || tried.final) return false;
  return tried.status >= 500 || (tried.status === 409 && tried.retryAfterMs !== undefined);
}
