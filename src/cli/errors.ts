import {
  ApiError,
  NOT_JSON_ANSWER,
  OutcomeUnknownError,
  UnexpectedResponseError,
  UnreachableError,
} from '../api/errors.ts';
import { CliError, EXIT, EXIT_CODE_NAMES, type ExitCode } from './exit-codes.ts';

/** What the user sees of a failure: one line, or one JSON object with --json. */
export interface Failure {
  exitCode: ExitCode;
  message: string;
  /** The --json error object: the service's body with all its fields, plus status and code. */
  json: Record<string, unknown>;
}

/**
 * Every error to an exit code, in one place:
 * 400/404/409 (and other 4xx) → 2; 401, 403 and 503 "no API keys" → 4; 429 and the faucet's
 * cooldown → 5; unreachable or timed out → 6; a write whose outcome is unknown → 7; other
 * 5xx and unexpected answers → 1. With
 * `quiet` (--quiet), a local error's message leaves out its did-you-means.
 */
export function describeFailure(error: unknown, quiet = false): Failure {
  if (error instanceof ApiError) {
    const { exitCode, code } = classify(error);
    return {
      exitCode,
      message: `${error.status}: ${error.message}${hint(error)}`,
      json: { ...error.body, status: error.status, code },
    };
  }
  if (error instanceof UnreachableError) {
    return local(error.message, EXIT.unreachable);
  }
  if (error instanceof OutcomeUnknownError) return outcomeUnknown(error);
  if (error instanceof UnexpectedResponseError) {
    return {
      exitCode: EXIT.failure,
      message: `${error.message}${/not JSON/.test(error.message) ? NOT_OURS_HINT : ''}`,
      json: { error: error.message, status: error.status, code: 'unexpected_response' },
    };
  }
  // By name, so this module does not load the GraphQL code.
  if (error instanceof CliError && error.name === 'GraphqlFailure') {
    const { status, graphqlCode } = error as CliError & {
      status: number | null;
      graphqlCode: string | null;
    };
    return {
      exitCode: error.exitCode,
      message: error.message,
      json: { error: error.message, status, code: error.code, graphql_code: graphqlCode },
    };
  }
  // By name, so this module does not load the seed code. The step's cause decides the exit
  // code (a 403 is still 4), and the message and --json error say which step it was.
  if (error instanceof Error && error.name === 'SeedStepError') {
    const { step, kind, tookEffect } = error as Error & {
      step: string;
      kind: string;
      tookEffect: string | undefined;
    };
    const cause = describeFailure(error.cause, quiet);
    const where = `step ${step} (${kind}) failed: `;
    // Part of the step took effect (an agent registered, its tier refused): say what, and
    // where its results are.
    const part =
      tookEffect === undefined
        ? ''
        : `; before it failed, it ${tookEffect}: in the map as ${step}, with "complete": false`;
    return {
      exitCode: cause.exitCode,
      message: `${where}${cause.message}${part}`,
      json: {
        ...cause.json,
        error: `${where}${String(cause.json.error ?? '')}${part}`,
        step,
        ...(tookEffect !== undefined && { took_effect: tookEffect }),
      },
    };
  }
  // --quiet: a usage error comes without its did-you-mean.
  if (error instanceof CliError) {
    return local(quiet ? error.quietMessage : error.message, error.exitCode, error.code);
  }
  // By name, so this module does not load the keystore code.
  if (error instanceof Error && error.name === 'KeystoreError') {
    const kind = (error as Error & { kind?: string }).kind;
    return local(error.message, kind === 'auth' ? EXIT.auth : EXIT.usage);
  }
  if (error instanceof Error && error.name === 'ExitPromptError') {
    return local('cancelled', EXIT.cancelled);
  }
  return local(
    `unexpected error: ${error instanceof Error ? error.message : String(error)}`,
    EXIT.failure,
  );
}

const REGISTER_WRITE = 'POST /api/v1/agent/auth/register';

/**
 * A write that may or may not have taken effect: its key, and the two ways to finish it. The
 * --json error carries the key as `idempotency_key`, with the last answer's body and status.
 */
function outcomeUnknown(error: OutcomeUnknownError): Failure {
  const tries = `${error.tries} ${error.tries === 1 ? 'try' : 'tries'}`;
  const why = error.honoured
    ? tries
    : `${tries}: this service has not shown that it honours Idempotency-Key, so it was not sent again`;
  const serviceSaid = error.body ? `; the service said: ${error.body.error}` : '';
  const first = `${error.write}: the outcome is unknown (${error.reason}${serviceSaid}; ${why}); it may or may not have taken effect`;
  const key = error.rerunKey;
  const finish =
    error.write === REGISTER_WRITE
      ? // The signed request is kept under its key (src/cli/registration.ts): sent again, it
        // cannot register twice (its nonce is used once), and its answer holds the API key.
        `finish it: run the same command again with --idempotency-key ${key}: it sends the same signed registration again, which ${error.honoured ? 'the service' : 'a service that honours the key'} answers with what it did, the API key included`
      : error.honoured
        ? `finish it: run the same command again with --idempotency-key ${key} (the service answers what it did, or does it once), or look it up with \`agentctl data transactions\``
        : `finish it: look it up with \`agentctl data transactions\`; or run the same command again with --idempotency-key ${key}, which a service that honours the key answers with what it did`;
  return {
    exitCode: EXIT.outcomeUnknown,
    message: `${first}
idempotency key: ${key}
${finish}`,
    json: {
      ...error.body,
      error: `${first}; ${finish}`,
      status: error.status,
      code: EXIT_CODE_NAMES[EXIT.outcomeUnknown],
      idempotency_key: key,
    },
  };
}

function local(message: string, exitCode: ExitCode, code = EXIT_CODE_NAMES[exitCode]): Failure {
  return { exitCode, message, json: { error: message, status: null, code } };
}

function classify(error: ApiError): { exitCode: ExitCode; code: string } {
  const { status } = error;
  if (error.isCooldown) return { exitCode: EXIT.rateLimited, code: 'cooldown' };
  if (status === 429) return { exitCode: EXIT.rateLimited, code: 'rate_limited' };
  if (status === 401) return { exitCode: EXIT.auth, code: 'unauthorized' };
  if (status === 403) return { exitCode: EXIT.auth, code: 'forbidden' };
  // The spec's 503: the server has no API keys at all. Other 503s are the service's trouble.
  if (status === 503 && /api key/i.test(error.message)) {
    return { exitCode: EXIT.auth, code: 'no_api_keys' };
  }
  if (status === 404) return { exitCode: EXIT.usage, code: 'not_found' };
  if (status === 409) return { exitCode: EXIT.usage, code: 'conflict' };
  if (status >= 400 && status < 500) return { exitCode: EXIT.usage, code: 'bad_request' };
  return { exitCode: EXIT.failure, code: status === 503 ? 'unavailable' : 'server_error' };
}

/** Said when an answer is not JSON: the URL likely names something else than the service. */
const NOT_OURS_HINT = '; is this an agentctl service? check --base-url (or --data-url)';

function hint(error: ApiError): string {
  if (error.message.startsWith(NOT_JSON_ANSWER)) return NOT_OURS_HINT;
  if ((error.status === 401 || error.status === 503) && /api key/i.test(error.message)) {
    return ' (register with `agentctl register`, or check --api-key / AGENTCTL_API_KEY)';
  }
  if (error.status === 403 && /tier/i.test(error.message)) {
    const needed = /tier (\w+)/.exec(error.message)?.[1] ?? 'established';
    return ` (the service grants tiers; against a local sandbox, raise it with \`agentctl sandbox tier <wallet> ${needed}\`)`;
  }
  return '';
}
