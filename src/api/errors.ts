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
