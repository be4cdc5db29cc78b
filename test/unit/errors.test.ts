import { describe, expect, it } from 'vitest';
import {
  ApiError,
  OutcomeUnknownError,
  UnexpectedResponseError,
  UnreachableError,
} from '../../src/api/errors.ts';
import { describeFailure } from '../../src/cli/errors.ts';
import { CliError, EXIT } from '../../src/cli/exit-codes.ts';
import { canPrompt } from '../../src/cli/tty.ts';

const api = (status: number, body: Record<string, unknown> = { error: 'x' }) =>
  describeFailure(new ApiError(status, { error: 'x', ...body }, true));

describe('describeFailure', () => {
  it.each([
    [400, 2, 'bad_request'],
    [404, 2, 'not_found'],
    [409, 2, 'conflict'],
    [401, 4, 'unauthorized'],
    [403, 4, 'forbidden'],
    [429, 5, 'rate_limited'],
    [500, 1, 'server_error'],
    [502, 1, 'server_error'],
    [503, 1, 'unavailable'],
  ])('maps HTTP %i to exit %i (%s)', (status, exitCode, code) => {
    const failure = api(status);
    expect(failure.exitCode).toBe(exitCode);
    expect(failure.json).toEqual({ error: 'x', status, code });
  });

  it("says a registration's unknown outcome is finished by its rerun, which recovers the API key", () => {
    const lost = (honoured: boolean) =>
      describeFailure(
        new OutcomeUnknownError({
          write: 'POST /api/v1/agent/auth/register',
          idempotencyKey: 'k-1',
          rerunKey: 'k-1',
          reason: 'the connection was closed after it was sent',
          tries: honoured ? 4 : 1,
          honoured,
        }),
      );
    expect(lost(true).exitCode).toBe(EXIT.outcomeUnknown);
    expect(lost(true).message.split('\n').slice(1)).toEqual([
      'idempotency key: k-1',
      'finish it: run the same command again with --idempotency-key k-1: it sends the same signed registration again, which the service answers with what it did, the API key included',
    ]);
    expect(lost(false).message).toContain(
      'which a service that honours the key answers with what it did, the API key included',
    );
    expect(lost(false).json).toMatchObject({ code: 'outcome_unknown', idempotency_key: 'k-1' });
  });

  it('maps the spec 503 "no API keys" to exit 4', () => {
    expect(api(503, { error: 'no API keys are configured' }).exitCode).toBe(EXIT.auth);
  });

  it('maps the faucet cooldown to exit 5 and keeps every field of the body', () => {
    const failure = api(429, {
      success: false,
      agent_address: '0xabc',
      next_eligible_timestamp: 1_800_000_000,
      seconds_remaining: 42,
    });
    expect(failure.exitCode).toBe(EXIT.rateLimited);
    expect(failure.json).toEqual({
      error: 'x',
      success: false,
      agent_address: '0xabc',
      next_eligible_timestamp: 1_800_000_000,
      seconds_remaining: 42,
      status: 429,
      code: 'cooldown',
    });
  });

  it('maps local failures', () => {
    expect(describeFailure(new UnreachableError('http://x', 'refused')).exitCode).toBe(6);
    expect(describeFailure(new UnexpectedResponseError(200, 'bad shape')).exitCode).toBe(1);
    const usage = describeFailure(new CliError('missing --name', EXIT.usage));
    expect(usage).toEqual({
      exitCode: 2,
      message: 'missing --name',
      json: { error: 'missing --name', status: null, code: 'usage' },
    });
    const cancelled = new Error('User force closed the prompt');
    cancelled.name = 'ExitPromptError';
    expect(describeFailure(cancelled).exitCode).toBe(130);
    expect(describeFailure(new TypeError('boom')).exitCode).toBe(1);
  });
});

describe('canPrompt', () => {
  it('prompts only with two TTYs and no CI', () => {
    expect(canPrompt({}, { isTTY: true }, { isTTY: true })).toBe(true);
    expect(canPrompt({ CI: 'true' }, { isTTY: true }, { isTTY: true })).toBe(false);
    expect(canPrompt({}, { isTTY: false }, { isTTY: true })).toBe(false);
    expect(canPrompt({}, { isTTY: true }, {})).toBe(false);
  });
});
