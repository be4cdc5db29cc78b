/** Exit codes: documented in the README and in `agentctl --help`. */
export const EXIT = {
  ok: 0,
  failure: 1,
  usage: 2,
  writerLocked: 3,
  auth: 4,
  rateLimited: 5,
  unreachable: 6,
  outcomeUnknown: 7,
  cancelled: 130,
} as const;
export type ExitCode = (typeof EXIT)[keyof typeof EXIT];

/** Within 80 columns, as all help is. */
export const EXIT_CODE_HELP = `
Exit codes:
  0    ok
  1    service error or unexpected response; not healthy (health, serve status);
       doctor found a problem
  2    usage or invalid input, including HTTP 400/404/409
  3    serve --database: another writer holds the sandbox (its lock)
  4    authentication or permission: 401, 403, 503 with no keys, or no key
  5    rate limited or cooling down: 429 or faucet cooldown
  6    service unreachable or timed out (for a write: before it was sent;
       agentctl api: also a lost answer)
  7    a write's outcome is unknown (its answer was lost, or the service
       failed): finish it by running the same command again with the
       --idempotency-key it printed
  130  cancelled`;

/** The `code` of a local failure in the --json error object, by exit code. */
export const EXIT_CODE_NAMES: Record<ExitCode, string> = {
  0: 'ok',
  1: 'failure',
  2: 'usage',
  3: 'writer_locked',
  4: 'auth',
  5: 'rate_limited',
  6: 'unreachable',
  7: 'outcome_unknown',
  130: 'cancelled',
};

/** An error the CLI reports as one line on stderr and maps to `exitCode`. */
export class CliError extends Error {
  readonly exitCode: ExitCode;
  /** The --json error's `code`, when more precise than the exit code's name. */
  readonly code: string | undefined;
  /** The message as --quiet reports it: without its did-you-means (see suggesting()). */
  readonly quietMessage: string;

  constructor(
    message: string | { text: string; quiet: string },
    exitCode: ExitCode,
    code?: string,
  ) {
    super(typeof message === 'string' ? message : message.text);
    this.quietMessage = typeof message === 'string' ? message : message.quiet;
    this.name = 'CliError';
    this.exitCode = exitCode;
    this.code = code;
  }
}
