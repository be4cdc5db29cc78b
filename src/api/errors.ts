import type { ErrorBody } from './schemas/index.ts';

/** The start of an error's message when its body was not JSON (an HTML page, say). */
export const NOT_JSON_ANSWER = 'the answer is not JSON';

/** The service answered with a non-2xx status. `body` keeps every field it sent. */
export class ApiError extends Error {
  readonly status: number;
  readonly body: ErrorBody;
  readonly authenticated: boolean;

  constructor(status: number, body: ErrorBody, authenticated: boolean) {
    super(body.error);
    this.name = 'ApiError';
    this.status = status;
    this.body = body;
    this.authenticated = authenticated;
  }

  /** The faucet's cooldown answer: `success: false` with the time it may be asked again. */
  get isCooldown(): boolean {
    return this.body.success === false && typeof this.body.next_eligible_timestamp === 'number';
  }
}

/** The service could not be reached, or did not answer in time, within the retry budget. */
export class UnreachableError extends Error {
  readonly url: string;

  constructor(url: string, reason: string) {
    super(`cannot reach ${url}: ${reason}`);
    this.name = 'UnreachableError';
    this.url = url;
  }
}

/** A 2xx answer that is not JSON, or not the shape the contract says. */
export class UnexpectedResponseError extends Error {
  readonly status: number;

  constructor(status: number, message: string) {
    super(message);
    this.name = 'UnexpectedResponseError';
    this.status = status;
  }
}

/**
 * A write whose outcome is still unknown after its last try: the answer was lost, the service
 * failed (5xx), or the same key was still running. It may or may not have taken effect; sent
 * again with `rerunKey` (the same Idempotency-Key) to a service that honours keys, it is
 * answered with what it did, or carried out once.
 */
export class OutcomeUnknownError extends Error {
  /** "POST /api/v1/agent/vault/deposit". */
  readonly write: string;
  /** The key the last try carried. */
  readonly idempotencyKey: string;
  /** The key to give `--idempotency-key` to finish it (a seed run's own, say). */
  readonly rerunKey: string;
  /** Why it is unknown: "the connection was closed", "HTTP 502", … */
  readonly reason: string;
  readonly tries: number;
  /** Whether the service has shown it honours keys (else it was tried once). */
  readonly honoured: boolean;
  /** The last answer's status and body, when there was one. */
  readonly status: number | null;
  readonly body: ErrorBody | undefined;

  constructor(fields: {
    write: string;
    idempotencyKey: string;
    rerunKey: string;
    reason: string;
    tries: number;
    honoured: boolean;
    status?: number;
    body?: ErrorBody;
  }) {
    super(`${fields.write}: the outcome is unknown (${fields.reason})`);
    this.name = 'OutcomeUnknownError';
    this.write = fields.write;
    this.idempotencyKey = fields.idempotencyKey;
    this.rerunKey = fields.rerunKey;
    this.reason = fields.reason;
    this.tries = fields.tries;
    this.honoured = fields.honoured;
    this.status = fields.status ?? null;
    this.body = fields.body;
  }
}
