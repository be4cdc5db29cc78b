/**
 * An error whose message is safe to show the client. The error handler sends
 * `{"error": message}` with `statusCode`; anything else becomes a generic 500.
 */
export class HttpError extends Error {
  readonly statusCode: number;

  constructor(statusCode: number, message: string) {
    super(message);
    this.name = 'HttpError';
    this.statusCode = statusCode;
  }
}

/** The sandbox cannot start with what it was given; the message says what to change. */
export class StartupError extends Error {}
