import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer as createHttpServer, type IncomingMessage } from 'node:http';
import { type AddressInfo, createServer as createNetServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { type ApiClientOptions, createApiClient } from '../../src/api/client.ts';
import { ApiError, OutcomeUnknownError, UnreachableError } from '../../src/api/errors.ts';
import {
  backoff,
  decideAfterWrite,
  idempotencyKeyProblem,
  isValidIdempotencyKey,
  MAX_WRITE_RETRY_AFTER_MS,
  originOf,
  WRITE_ATTEMPTS,
  type WriteTry,
} from '../../src/api/idempotency.ts';
import { describeFailure } from '../../src/cli/errors.ts';
import { EXIT } from '../../src/cli/exit-codes.ts';
import { MAX_KEY_HONOURING_SERVICES, openConfig } from '../../src/config/profiles.ts';
import { capturedContext } from '../helpers/run-context.ts';

const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
const lost: WriteTry = { kind: 'lost' };
const answered = (status: number, retryAfterMs?: number, final = false): WriteTry => ({
  kind: 'status',
  status,
  retryAfterMs,
  final,
});

describe('when a keyed write is tried again', () => {
  it('never against a service not known to honour keys, whatever happened', () => {
    for (const tried of [lost, answered(502), answered(409, 1000), answered(429, 0)]) {
      expect(decideAfterWrite(tried, 0, false).retry).toBe(false);
    }
  });

  it('after a lost answer, a 5xx, a 409 with Retry-After or a 429, up to the last try', () => {
    for (const tried of [lost, answered(500), answered(503), answered(409, 1000), answered(429)]) {
      for (let attempt = 0; attempt < WRITE_ATTEMPTS - 1; attempt++) {
        expect(decideAfterWrite(tried, attempt, true).retry).toBe(true);
      }
      expect(decideAfterWrite(tried, WRITE_ATTEMPTS - 1, true).retry).toBe(false);
    }
  });

  it('never after an answer that waiting does not change', () => {
    // A 409 without Retry-After is the service's own conflict (a wallet registered already).
    for (const tried of [
      answered(400),
      answered(404),
      answered(409),
      answered(422),
      answered(429, undefined, true),
      answered(503, undefined, true),
      answered(429, MAX_WRITE_RETRY_AFTER_MS + 1),
      { kind: 'not-sent', transient: false } as const,
    ]) {
      expect(decideAfterWrite(tried, 0, true)).toEqual({ retry: false, unknown: false });
    }
  });

  it('waits at least Retry-After, else a jittered backoff of at least 100 ms', () => {
    expect(decideAfterWrite(answered(429, 2000), 0, true, () => 0)).toMatchObject({
      retry: true,
      waitMs: 2000,
    });
    expect(decideAfterWrite(lost, 0, true, () => 0)).toMatchObject({ retry: true, waitMs: 100 });
    expect(decideAfterWrite(lost, 2, true, () => 1)).toMatchObject({ retry: true, waitMs: 1000 });
    expect(backoff(10, () => 1)).toBe(4000);
  });

  it('calls the outcome unknown when the write may have run: lost, 5xx, or still running', () => {
    const last = WRITE_ATTEMPTS - 1;
    expect(decideAfterWrite(lost, 0, false)).toEqual({ retry: false, unknown: true });
    expect(decideAfterWrite(answered(502), last, true)).toEqual({ retry: false, unknown: true });
    expect(decideAfterWrite(answered(409, 1000), last, true)).toEqual({
      retry: false,
      unknown: true,
    });
    // A 429 did not run: giving up on it is a rate limit, not an unknown outcome.
    expect(decideAfterWrite(answered(429), last, true)).toEqual({ retry: false, unknown: false });
    // Nothing was sent: not unknown, even when it was worth another try.
    expect(decideAfterWrite({ kind: 'not-sent', transient: true }, last, true)).toEqual({
      retry: false,
      unknown: false,
    });
  });
});

describe('an Idempotency-Key', () => {
  it('is 1 to 255 printable ASCII characters, as the service takes', () => {
    expect(isValidIdempotencyKey('ci-1234:deposit step')).toBe(true);
    expect(isValidIdempotencyKey('x'.repeat(255))).toBe(true);
    expect(idempotencyKeyProblem('')).toBe('must not be empty');
    expect(idempotencyKeyProblem('x'.repeat(256))).toMatch(/at most 255 characters \(it has 256/);
    for (const bad of ['tab\there', 'né', 'line\n']) {
      expect(idempotencyKeyProblem(bad)).toMatch(/printable ASCII/);
    }
  });

  it('neither begins nor ends with a space: HTTP drops them, and " k" would be the key "k"', () => {
    expect(idempotencyKeyProblem('ci 81 deposit')).toBeUndefined();
    for (const spaced of [' ci-81', 'ci-81 ', ' ']) {
      expect(idempotencyKeyProblem(spaced)).toBe(
        'must not begin or end with a space (HTTP drops them: the service would see another key)',
      );
    }
  });

  it('is remembered by origin: scheme, host and port', () => {
    expect(originOf('http://127.0.0.1:8787/')).toBe('http://127.0.0.1:8787');
    expect(originOf('https://api.example.com/base')).toBe('https://api.example.com:443');
    expect(originOf('http://Example.com')).toBe('http://example.com:80');
  });
});

const servers: Array<{ close(): void }> = [];
afterEach(() => {
  for (const server of servers.splice(0)) server.close();
});

interface Seen {
  path: string;
  key: string | undefined;
}

/** A node:http service answering by the request's number (0 for the first); what it saw. */
async function service(answer: (n: number, request: IncomingMessage) => 'reset' | Answer) {
  const seen: Seen[] = [];
  const server = createHttpServer(async (request, response) => {
    for await (const _chunk of request);
    const n = seen.length;
    seen.push({
      path: request.url ?? '',
      key: request.headers['idempotency-key'] as string | undefined,
    });
    const given = answer(n, request);
    if (given === 'reset') return request.socket.resetAndDestroy();
    response.writeHead(given.status ?? 200, {
      'content-type': 'application/json',
      ...given.headers,
    });
    response.end(JSON.stringify(given.body ?? {}));
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, seen };
}
interface Answer {
  status?: number;
  body?: unknown;
  headers?: Record<string, string>;
}
const REPLAYED = { 'idempotent-replayed': 'false' };
const VOTED = { body: { success: true } };

function clientOf(url: string, extra: Partial<ApiClientOptions> = {}) {
  const retries: string[] = [];
  const client = createApiClient({
    baseUrl: url,
    userAgent: 'test',
    apiKey: async () => 'agk_test',
    onRetry: (reason, _wait, write) =>
      retries.push(`${reason}: ${write?.method} ${write?.path} ${write?.attempt}/${write?.of}`),
    ...extra,
  });
  return { client, retries };
}
const vote = { proposal_id: 1, support: 1 };
/** The exit code a vote ends with against `url`, known to honour keys; it must be an ApiError. */
async function voteFailure(url: string) {
  const { client } = clientOf(url, HONOURING);
  try {
    const error = await client.vote(vote).catch((e) => e);
    expect(error).toBeInstanceOf(ApiError);
    return describeFailure(error).exitCode;
  } finally {
    await client.close();
  }
}
/** A service already known to honour keys (as if remembered from an earlier command). */
const HONOURING: Partial<ApiClientOptions> = {
  keyHonouring: { honours: async () => true, learned: async () => {} },
};

describe('the client on keyed writes', () => {
  it('sends a new UUID v4 with each write, and the same one on each of its tries', async () => {
    // Honours keys (the first answer says so), then fails the second write once.
    const { url, seen } = await service((n) =>
      n === 1 ? { status: 503, body: { error: 'busy' } } : { ...VOTED, headers: REPLAYED },
    );
    const { client, retries } = clientOf(url);
    try {
      await client.vote(vote);
      await client.vote(vote);
    } finally {
      await client.close();
    }
    expect(seen).toHaveLength(3);
    for (const { key } of seen) expect(key).toMatch(UUID_V4);
    expect(seen[1]?.key).not.toBe(seen[0]?.key);
    expect(seen[2]?.key).toBe(seen[1]?.key);
    expect(retries).toEqual(['HTTP 503: POST /api/v1/agent/governance/vote 2/4']);
  });

  it('retries a reset with the same key where keys are known to be honoured', async () => {
    const { url, seen } = await service((n) =>
      n === 0 ? 'reset' : { ...VOTED, headers: REPLAYED },
    );
    const { client, retries } = clientOf(url, {
      idempotencyKey: () => ({ key: 'ci-42:vote', rerunKey: 'ci-42:vote' }),
      ...HONOURING,
    });
    try {
      expect((await client.vote(vote)).status).toBe(200);
    } finally {
      await client.close();
    }
    expect(seen.map(({ key }) => key)).toEqual(['ci-42:vote', 'ci-42:vote']);
    expect(retries).toEqual([
      'the connection was closed after it was sent: POST /api/v1/agent/governance/vote 2/4',
    ]);
  });

  it('tries a write once where keys are not known to be honoured: its outcome is unknown', async () => {
    const { url, seen } = await service(() => ({ status: 502, body: { error: 'bad gateway' } }));
    const { client, retries } = clientOf(url, {
      idempotencyKey: () => ({ key: 'k:3', rerunKey: 'k' }),
    });
    let error: unknown;
    try {
      error = await client.deposit({ vault_id: 'moderate', amount_usdc: 1 }).catch((e) => e);
    } finally {
      await client.close();
    }
    expect(seen).toHaveLength(1);
    expect(retries).toEqual([]);
    expect(error).toBeInstanceOf(OutcomeUnknownError);
    const failure = describeFailure(error);
    expect(failure.exitCode).toBe(EXIT.outcomeUnknown);
    expect(failure.json).toMatchObject({
      status: 502,
      code: 'outcome_unknown',
      idempotency_key: 'k',
    });
    expect(failure.message).toBe(
      [
        'POST /api/v1/agent/vault/deposit: the outcome is unknown (HTTP 502; the service said: bad gateway; 1 try: this service has not shown that it honours Idempotency-Key, so it was not sent again); it may or may not have taken effect',
        'idempotency key: k',
        'finish it: look it up with `agentctl data transactions`; or run the same command again with --idempotency-key k, which a service that honours the key answers with what it did',
      ].join('\n'),
    );
  });

  it('gives up after the last try, the outcome unknown, and says how to finish it', async () => {
    const { url, seen } = await service(() => ({
      status: 409,
      body: { error: 'a request with this key is still running' },
      headers: { 'retry-after': '0' },
    }));
    const { client, retries } = clientOf(url, HONOURING);
    let error: unknown;
    try {
      error = await client.faucet().catch((e) => e);
    } finally {
      await client.close();
    }
    expect(seen).toHaveLength(WRITE_ATTEMPTS);
    expect(new Set(seen.map(({ key }) => key)).size).toBe(1);
    expect(retries).toHaveLength(WRITE_ATTEMPTS - 1);
    const failure = describeFailure(error);
    expect(failure.exitCode).toBe(EXIT.outcomeUnknown);
    expect(failure.message).toContain(`(HTTP 409; the service said: a request with this key`);
    expect(failure.message).toContain(
      `finish it: run the same command again with --idempotency-key ${seen[0]?.key} (the service answers what it did, or does it once), or look it up with \`agentctl data transactions\``,
    );
  });

  it("takes a kept 5xx (it says Idempotent-Replayed) as the write's outcome: not tried again, not unknown", async () => {
    const { url, seen } = await service(() => ({
      status: 502,
      body: { error: 'the transaction reverted' },
      headers: REPLAYED,
    }));
    expect(await voteFailure(url)).toBe(EXIT.failure);
    expect(seen).toHaveLength(1);
  });

  it('stays unknown once a try may have run, though a later one never reached the service', async () => {
    // The deposit's answer is lost (it may have been done), then the service is gone: the
    // retry is refused. Exit 6 ("before it was sent") would hide the key of a done deposit.
    const { url, seen } = await service((n) => {
      if (n > 0) return VOTED;
      for (const server of servers.splice(0)) server.close();
      return 'reset';
    });
    const { client } = clientOf(url, {
      idempotencyKey: () => ({ key: 'ci-9:deposit', rerunKey: 'ci-9:deposit' }),
      ...HONOURING,
    });
    let error: unknown;
    try {
      error = await client.deposit({ vault_id: 'moderate', amount_usdc: 1 }).catch((e) => e);
    } finally {
      await client.close();
    }
    expect(seen).toHaveLength(1);
    expect(error).toBeInstanceOf(OutcomeUnknownError);
    const failure = describeFailure(error);
    expect(failure.exitCode).toBe(EXIT.outcomeUnknown);
    expect(failure.message).toContain(
      'the outcome is unknown (the connection was closed after it was sent, then connection refused (is the service running?); 2 tries)',
    );
    expect(failure.json).toMatchObject({ idempotency_key: 'ci-9:deposit', status: null });
  });

  it('stays unknown when the answer is lost on a kept-alive connection and the service is gone', async () => {
    // A read first, so that the deposit goes on its kept-alive connection; the service is
    // killed between the deposit's commit and its answer. The transport's own resend (for an
    // idle connection the server closed) is refused: that says nothing of the first send.
    const { url, seen } = await service((n, request) => {
      if (request.method === 'GET') return { body: [] };
      if (n > 1) return VOTED;
      for (const server of servers.splice(0)) server.close();
      return 'reset';
    });
    const { client } = clientOf(url, {
      idempotencyKey: () => ({ key: 'ci-10:deposit', rerunKey: 'ci-10:deposit' }),
      ...HONOURING,
    });
    let error: unknown;
    try {
      await client.proposals();
      error = await client.deposit({ vault_id: 'moderate', amount_usdc: 1 }).catch((e) => e);
    } finally {
      await client.close();
    }
    expect(seen.map(({ path }) => path)).toEqual([
      '/api/v1/proposals',
      '/api/v1/agent/vault/deposit',
    ]);
    expect(error).toBeInstanceOf(OutcomeUnknownError);
    expect(describeFailure(error)).toMatchObject({
      exitCode: EXIT.outcomeUnknown,
      json: { idempotency_key: 'ci-10:deposit' },
    });
  });

  it('stays unknown once a try may have run, though a later one was rate limited', async () => {
    // A rate limit refuses before the key is looked up: it says nothing of the first try.
    const { url, seen } = await service((n) =>
      n === 0
        ? 'reset'
        : { status: 429, body: { error: 'slow down' }, headers: { 'retry-after': '60' } },
    );
    const { client } = clientOf(url, HONOURING);
    let error: unknown;
    try {
      error = await client.vote(vote).catch((e) => e);
    } finally {
      await client.close();
    }
    expect(seen).toHaveLength(2);
    const failure = describeFailure(error);
    expect(failure.exitCode).toBe(EXIT.outcomeUnknown);
    expect(failure.json).toMatchObject({ status: 429, idempotency_key: seen[0]?.key });
  });

  it('takes a later kept answer as the outcome, whatever came before', async () => {
    const { url, seen } = await service((n) =>
      n === 0 ? 'reset' : { status: 400, body: { error: 'no such proposal' }, headers: REPLAYED },
    );
    expect(await voteFailure(url)).toBe(EXIT.usage);
    expect(seen).toHaveLength(2);
  });

  it('does not call a refusal unknown: a 4xx ends the write as it is', async () => {
    const { url, seen } = await service(() => ({ status: 422, body: { error: 'key reused' } }));
    const { client } = clientOf(url, HONOURING);
    try {
      await expect(client.vote(vote)).rejects.toBeInstanceOf(ApiError);
    } finally {
      await client.close();
    }
    expect(seen).toHaveLength(1);
  });

  it('learns that a service honours keys from Idempotent-Replayed, and says so once', async () => {
    const { url } = await service(() => ({ ...VOTED, headers: REPLAYED }));
    const learned: string[] = [];
    const { client } = clientOf(url, {
      keyHonouring: {
        honours: async () => false,
        learned: async (origin) => {
          learned.push(origin);
        },
      },
    });
    try {
      await client.vote(vote);
      await client.vote(vote);
    } finally {
      await client.close();
    }
    expect(learned).toEqual([url]);
  });

  it('forgets a remembered service once a keyed write of its is answered 2xx without Idempotent-Replayed', async () => {
    // Another service on a remembered origin (a port-forward to the live one, say): a write it
    // did without saying so shows it ignores keys, so a later lost answer is not sent again.
    const { url, seen } = await service((n) => (n === 0 ? VOTED : 'reset'));
    const forgot: string[] = [];
    const { client, retries } = clientOf(url, {
      keyHonouring: {
        honours: async (origin) => !forgot.includes(origin),
        learned: async () => {},
        forgot: async (origin) => {
          forgot.push(origin);
        },
      },
    });
    let error: unknown;
    try {
      await client.vote(vote);
      error = await client.vote(vote).catch((e) => e);
    } finally {
      await client.close();
    }
    expect(forgot).toEqual([url]);
    expect(seen).toHaveLength(2);
    expect(retries).toEqual([]);
    expect(describeFailure(error).message).toContain(
      '1 try: this service has not shown that it honours Idempotency-Key',
    );
  });

  it('sends no key with a read, and never one with `agentctl api`', async () => {
    const { url, seen } = await service(() => ({ body: { positions: [] } }));
    const { client } = clientOf(url);
    try {
      await client.walletPositions.asReceived('0x0000000000000000000000000000000000000001');
      await client.raw('POST', '/api/v1/agent/faucet', {});
    } finally {
      await client.close();
    }
    expect(seen.map(({ key }) => key)).toEqual([undefined, undefined]);
  });

  it('calls a write unknown when its answer cannot be read as HTTP: it was sent, and may have run', async () => {
    const server = createNetServer((socket) => {
      socket.once('data', () => socket.end('this is not HTTP\r\n\r\n'));
    });
    servers.push(server);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const { client } = clientOf(url, {
      idempotencyKey: () => ({ key: 'ci-11:vote', rerunKey: 'ci-11:vote' }),
    });
    let error: unknown;
    try {
      error = await client.vote(vote).catch((e) => e);
    } finally {
      await client.close();
    }
    expect(describeFailure(error)).toMatchObject({
      exitCode: EXIT.outcomeUnknown,
      json: { idempotency_key: 'ci-11:vote' },
    });
  });

  it('says a keyed write that could not connect never reached the service (exit 6)', async () => {
    const { url } = await service(() => VOTED);
    servers.splice(0).forEach((server) => {
      server.close();
    });
    const { client } = clientOf(url);
    try {
      await expect(client.vote(vote)).rejects.toBeInstanceOf(UnreachableError);
    } finally {
      await client.close();
    }
  });
});

describe('the services that honour keys, in the configuration file', () => {
  const dir = mkdtempSync(join(tmpdir(), 'agentctl-keys-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('are kept beside the profiles, the newest 64, the oldest dropped', async () => {
    writeFileSync(
      join(dir, 'config.json'),
      JSON.stringify({ profiles: { default: { api_key: 'agk_x' } } }),
    );
    const config = openConfig({ AGENTCTL_CONFIG_DIR: dir });
    for (let port = 1; port <= MAX_KEY_HONOURING_SERVICES + 1; port++) {
      await config.rememberIdempotencyKeys(`http://127.0.0.1:${port}`);
    }
    const again = openConfig({ AGENTCTL_CONFIG_DIR: dir });
    expect(again.honoursIdempotencyKeys('http://127.0.0.1:1')).toBe(false);
    expect(again.honoursIdempotencyKeys('http://127.0.0.1:2')).toBe(true);
    expect(again.honoursIdempotencyKeys(`http://127.0.0.1:${MAX_KEY_HONOURING_SERVICES + 1}`)).toBe(
      true,
    );
    const stored = JSON.parse(readFileSync(join(dir, 'config.json'), 'utf8'));
    expect(stored.idempotency_key_services).toHaveLength(MAX_KEY_HONOURING_SERVICES);
    expect(stored.profiles).toEqual({ default: { api_key: 'agk_x' } });
  });

  it('are learned without losing an API key another command stores at the same time', async () => {
    // Two commands at once (a deposit learning its service, a register storing its one-time
    // key), as two processes: each reads the file and writes it back with its change.
    writeFileSync(join(dir, 'config.json'), JSON.stringify({ profiles: {} }));
    const deposit = openConfig({ AGENTCTL_CONFIG_DIR: dir });
    const register = openConfig({ AGENTCTL_CONFIG_DIR: dir });
    await Promise.all([
      deposit.rememberIdempotencyKeys('http://127.0.0.1:8799'),
      register.set('bot', { api_key: 'agk_only_copy' }),
    ]);
    const stored = JSON.parse(readFileSync(join(dir, 'config.json'), 'utf8'));
    expect(stored.profiles).toEqual({ bot: { api_key: 'agk_only_copy' } });
    expect(stored.idempotency_key_services).toEqual(['http://127.0.0.1:8799']);
  });

  it('lose a service shown to ignore keys, and only that one', async () => {
    writeFileSync(join(dir, 'config.json'), JSON.stringify({ profiles: {} }));
    const config = openConfig({ AGENTCTL_CONFIG_DIR: dir });
    await config.rememberIdempotencyKeys('http://a:1');
    await config.rememberIdempotencyKeys('http://b:2');
    await config.forgetIdempotencyKeys('http://a:1');
    const again = openConfig({ AGENTCTL_CONFIG_DIR: dir });
    expect(again.honoursIdempotencyKeys('http://a:1')).toBe(false);
    expect(again.honoursIdempotencyKeys('http://b:2')).toBe(true);
  });

  it('count as none when the list is damaged (it is only a cache)', () => {
    writeFileSync(
      join(dir, 'config.json'),
      JSON.stringify({ profiles: {}, idempotency_key_services: 'oops' }),
    );
    expect(openConfig({ AGENTCTL_CONFIG_DIR: dir }).honoursIdempotencyKeys('http://a:1')).toBe(
      false,
    );
  });
});

describe("a command's keys", () => {
  it('are --idempotency-key as given, or a new UUID for each write', async () => {
    const { url, seen } = await service(() => VOTED);
    for (const idempotencyKey of ['ci-run-7/step-3', undefined]) {
      const { context } = capturedContext(
        { baseUrl: url, apiKey: 'agk_x', ...(idempotencyKey && { idempotencyKey }) },
        { AGENTCTL_CONFIG_DIR: '/nonexistent' },
      );
      try {
        await (await context.client()).vote(vote);
      } finally {
        await context.close();
      }
    }
    expect(seen[0]?.key).toBe('ci-run-7/step-3');
    expect(seen[1]?.key).toMatch(UUID_V4);
  });

  it('are numbered from one base for a command of several writes, across its clients', async () => {
    const { url, seen } = await service(() => VOTED);
    const { context } = capturedContext(
      { baseUrl: url, apiKey: 'agk_x', idempotencyKey: 'seed-run' },
      { AGENTCTL_CONFIG_DIR: '/nonexistent' },
    );
    try {
      expect(context.numberWriteKeys()).toBe('seed-run');
      await (await context.client()).vote(vote);
      await (await context.clientWithKey('agk_other')).vote(vote);
    } finally {
      await context.close();
    }
    expect(seen.map(({ key }) => key)).toEqual(['seed-run:1', 'seed-run:2']);
  });
});
