import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createClient } from 'graphql-ws';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { BIN, registerOver, type ServeProcess, startServe } from '../helpers/serve.ts';

/**
 * `serve` as a server facing clients that misbehave: secrets never reach the log, every
 * answer has the contract's error shape, connections are bounded in number and time, and
 * SIGTERM exits promptly with keep-alive connections open.
 */

const TOKEN = 'limits-admin-token-0123456789';
const running: ServeProcess[] = [];
const dirs: string[] = [];

afterEach(async () => {
  // SIGTERM, so each serve stops its own anvil; SIGKILL only if it does not exit.
  for (const serve of running.splice(0)) {
    serve.child.kill('SIGTERM');
    const stopped = await Promise.race([
      serve.exited.then(() => true),
      new Promise((resolve) => setTimeout(() => resolve(false), 10_000)),
    ]);
    if (!stopped) serve.child.kill('SIGKILL');
  }
});
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

async function serve(args: string[] = [], env: NodeJS.ProcessEnv = {}): Promise<ServeProcess> {
  const started = await startServe(['--admin-token', TOKEN, ...args], env);
  running.push(started);
  return started;
}

function portOf(url: string): number {
  return Number(new URL(url).port);
}

interface RawConnection {
  socket: Socket;
  /** Everything received so far. */
  received(): string;
  /** Resolves once the server has closed the connection. */
  closed: Promise<void>;
  /** Resolves once `text` has been received. */
  waitFor(text: string): Promise<string>;
}

/** A plain TCP connection, for requests no HTTP client would send. */
function openRaw(url: string): Promise<RawConnection> {
  return new Promise((resolve, reject) => {
    const socket = connect(portOf(url), '127.0.0.1');
    let data = '';
    const waiters: Array<() => void> = [];
    socket.on('data', (chunk) => {
      data += chunk;
      for (const wake of waiters.splice(0)) wake();
    });
    socket.on('error', () => {});
    const closed = new Promise<void>((done) => socket.on('close', () => done()));
    socket.once('connect', () =>
      resolve({
        socket,
        received: () => data,
        closed,
        waitFor: async (text) => {
          while (!data.includes(text)) {
            await Promise.race([new Promise<void>((wake) => waiters.push(wake)), closed]);
            if (socket.destroyed && !data.includes(text)) {
              throw new Error(`connection closed before "${text}"; got: ${data}`);
            }
          }
          return data;
        },
      }),
    );
    socket.once('error', reject);
  });
}

/** Sends raw bytes on a new connection and returns the whole answer once the server closes it. */
async function rawExchange(url: string, request: string): Promise<string> {
  const connection = await openRaw(url);
  connection.socket.write(request);
  await connection.closed;
  return connection.received();
}

/** The status and JSON body of a raw HTTP/1.1 answer. */
function parseAnswer(answer: string): { status: number; body: unknown } {
  const [head = '', body = ''] = answer.split('\r\n\r\n');
  return { status: Number(head.split(' ')[1]), body: JSON.parse(body) };
}

function expectErrorShape(body: unknown): void {
  expect(body).toEqual({ error: expect.any(String) });
}

describe('secrets and the log', () => {
  /** Sends every secret in every place a client could put one. */
  async function sendSecretsEverywhere(url: string, secrets: string[]): Promise<void> {
    const [apiKey, adminToken] = secrets as [string, string];
    const headers = {
      'x-api-key': apiKey,
      'x-admin-token': adminToken,
      authorization: `Bearer ${apiKey}`,
      cookie: `api_key=${apiKey}; admin=${adminToken}`,
    };
    const paths = [
      `/api/v1/agent/me?api_key=${apiKey}&admin_token=${adminToken}&limit=5`,
      `/api/v1/leaderboard?token=${encodeURIComponent(apiKey)}`,
      `/api/v1/${apiKey}/${adminToken}`,
      '/sandbox/info',
    ];
    for (const path of paths) await fetch(`${url}${path}`, { headers });
    // In bodies: as a field, and in JSON that does not parse.
    await fetch(`${url}/api/v1/agent/vault/deposit`, {
      method: 'POST',
      headers: { ...headers, 'content-type': 'application/json' },
      body: JSON.stringify({ api_key: apiKey, admin_token: adminToken, vault_id: 'moderate' }),
    });
    await fetch(`${url}/api/v1/agent/vault/deposit`, {
      method: 'POST',
      headers: { ...headers, 'content-type': 'application/json' },
      body: `{"vault_id": ${apiKey} ${adminToken}`,
    });
    // What Node's parser refuses: a 70 KB header (431) and a malformed header line (400).
    const secretLines = `X-API-Key: ${apiKey}\r\nX-Admin-Token: ${adminToken}\r\n`;
    await rawExchange(
      url,
      `GET /health?api_key=${apiKey} HTTP/1.1\r\nHost: x\r\n${secretLines}X-Big: ${'a'.repeat(70_000)}\r\n\r\n`,
    );
    await rawExchange(
      url,
      `GET /health?api_key=${apiKey} HTTP/1.1\r\nHost: x\r\n${secretLines}not a header line\r\n\r\n`,
    );
    await rawExchange(url, `GET /${apiKey} HTTP/1.1 ${adminToken}\r\n\r\n`);
  }

  function expectNoSecret(log: string, secrets: string[]): void {
    expect(log).not.toContain('rawPacket');
    for (const secret of secrets) {
      expect(log).not.toContain(secret);
      expect(log).not.toContain(encodeURIComponent(secret));
      // Raw bytes as a JSON array of numbers (how a Buffer is logged).
      expect(log).not.toContain([...Buffer.from(secret.slice(0, 12))].join(','));
    }
  }

  it.each(['trace', 'debug', 'info', 'warn', 'error'])(
    'no API key or admin token reaches the log at level %s',
    async (level) => {
      const sandbox = await serve(['--log-level', level]);
      const { apiKey } = await registerOver(sandbox.url);
      await sendSecretsEverywhere(sandbox.url, [apiKey, TOKEN]);
      // A made-up key in the same places, as a client that mistypes one would send it.
      await sendSecretsEverywhere(sandbox.url, [`agk_${'f'.repeat(64)}`, TOKEN]);
      sandbox.child.kill('SIGTERM');
      await sandbox.exited;
      if (level === 'trace') expect(sandbox.stderr()).toContain('incoming request');
      expectNoSecret(sandbox.stderr(), [apiKey, TOKEN, `agk_${'f'.repeat(64)}`]);
    },
  );
});

describe('one error shape', () => {
  it('answers what Fastify and Node refuse with {"error": "..."} and names no path on disk', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'agentctl-limits-'));
    dirs.push(dir);
    const sandbox = await serve(['--state', join(dir, 'state')]);
    const requests = [
      // 431: headers too large.
      `GET /health HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(70_000)}\r\n\r\n`,
      // 400: a malformed header line, a malformed request line, a bad Content-Length.
      'GET /health HTTP/1.1\r\nHost: x\r\nnot a header\r\n\r\n',
      'NOT HTTP AT ALL\r\n\r\n',
      'POST /api/v1/agent/vault/deposit HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n',
      // Node's own: no Host on HTTP/1.1, and an Expect it does not support.
      'GET /health HTTP/1.1\r\nConnection: close\r\n\r\n',
      'POST /api/v1/agent/auth/register HTTP/1.1\r\nHost: x\r\nExpect: teapot\r\nContent-Length: 2\r\n\r\n{}',
    ];
    const statuses: number[] = [];
    for (const request of requests) {
      const answer = parseAnswer(await rawExchange(sandbox.url, request));
      statuses.push(answer.status);
      expectErrorShape(answer.body);
    }
    expect(statuses).toEqual([431, 400, 400, 400, 400, 417]);

    const fetched = [
      await fetch(`${sandbox.url}/%zz`),
      await fetch(`${sandbox.url}/no/such/route`),
      await fetch(`${sandbox.url}/api/v1/agent/auth/register`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: '{"a":',
      }),
      await fetch(`${sandbox.url}/api/v1/agent/auth/register`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ pad: 'x'.repeat(70_000) }),
      }),
      await fetch(`${sandbox.url}/api/v1/agent/auth/register`, {
        method: 'POST',
        headers: { 'content-type': 'text/plain' },
        body: 'hello',
      }),
    ];
    for (const response of fetched) {
      expect(response.status).toBeGreaterThanOrEqual(400);
      expect(response.status).toBeLessThan(500);
      const text = await response.text();
      expect(text).not.toContain(dir);
      expectErrorShape(JSON.parse(text));
    }
  });
});

describe('connections', () => {
  it('closes connections that send nothing, or send a request too slowly, with 408', async () => {
    const sandbox = await serve(['--request-timeout', '2']);
    const idle = await openRaw(sandbox.url);
    const slowBody = await openRaw(sandbox.url);
    slowBody.socket.write(
      'POST /api/v1/agent/auth/register HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{',
    );
    const drip = setInterval(() => slowBody.socket.write(' '), 200);
    const slowHeaders = await openRaw(sandbox.url);
    slowHeaders.socket.write('GET /health HTTP/1.1\r\n');
    const trickle = setInterval(() => slowHeaders.socket.write('X-A: b\r\n'), 200);
    try {
      // Each is closed by the server within the timeout plus Node's one-second check.
      const deadline = new Promise((_, reject) =>
        setTimeout(() => reject(new Error('a connection outlived its timeout')), 8_000),
      );
      await Promise.race([
        Promise.all([idle.closed, slowBody.closed, slowHeaders.closed]),
        deadline,
      ]);
    } finally {
      clearInterval(drip);
      clearInterval(trickle);
    }
    // Node answers 408 to a connection that never began a request, or it is closed silently.
    expect(idle.received()).toMatch(/^$|^HTTP\/1.1 408/);
    for (const slow of [slowBody, slowHeaders]) {
      const answer = parseAnswer(slow.received());
      expect(answer.status).toBe(408);
      expectErrorShape(answer.body);
    }
    // The server still serves.
    expect((await fetch(`${sandbox.url}/health`)).status).toBe(200);
  });

  it('keeps a GraphQL subscription open well past the request timeout', async () => {
    const sandbox = await serve(['--request-timeout', '1']);
    const answer = await fetch(`${sandbox.url}/graphql`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ query: '{ vaults { address } }' }),
    });
    const body = (await answer.json()) as { data: { vaults: Array<{ address: string }> } };
    const vault = body.data.vaults[0]?.address;
    const client = createClient({
      url: `${sandbox.url.replace(/^http/, 'ws')}/graphql`,
      retryAttempts: 0,
    });
    let closed: number | undefined;
    client.on('closed', (event) => {
      closed = (event as { code: number }).code;
    });
    const event = new Promise<unknown>((resolve, reject) => {
      client.subscribe(
        { query: `subscription { vaultUpdated(address: "${vault}") { address } }` },
        { next: resolve, error: reject, complete: () => reject(new Error('completed')) },
      );
    });
    // Past the request timeout, the first-request timer and Node's check (1 + 2 + 1 s).
    await new Promise((resolve) => setTimeout(resolve, 4500));
    expect(closed).toBeUndefined();
    const advanced = await fetch(`${sandbox.url}/sandbox/clock/advance`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-admin-token': TOKEN },
      body: JSON.stringify({ seconds: 3600 }),
    });
    expect(advanced.status).toBe(200);
    expect(await event).toEqual({ data: { vaultUpdated: { address: vault } } });
    expect(closed).toBeUndefined();
    await client.dispose();
  });

  it('refuses connections beyond --max-connections and serves the ones it holds', async () => {
    const sandbox = await serve(['--max-connections', '4']);
    const held = await Promise.all([0, 1, 2, 3].map(() => openRaw(sandbox.url)));
    // Accepted connections are counted once the server has seen them.
    await held[0]?.socket.write('GET /health HTTP/1.1\r\nHost: x\r\n\r\n');
    await held[0]?.waitFor('"status"');
    const refused = await openRaw(sandbox.url);
    // Closed at once, not by a timeout: a request sent on it gets no answer.
    refused.socket.write('GET /health HTTP/1.1\r\nHost: x\r\n\r\n');
    const closedAtOnce = await Promise.race([
      refused.closed.then(() => true),
      new Promise((resolve) => setTimeout(() => resolve(false), 2_000)),
    ]);
    expect(closedAtOnce).toBe(true);
    expect(refused.received()).toBe('');
    // Every held connection still gets its answers.
    for (const connection of held.slice(1)) {
      connection.socket.write('GET /health HTTP/1.1\r\nHost: x\r\n\r\n');
      expect(await connection.waitFor('"status"')).toContain('HTTP/1.1 200');
    }
    for (const connection of held) connection.socket.destroy();
  });

  it('under a low open-file limit, refuses connections rather than failing a write', async () => {
    const sandbox = await new Promise<ServeProcess>((resolve, reject) => {
      // The shell lowers the limit, then becomes serve.
      const child = spawn(
        '/bin/sh',
        [
          '-c',
          'ulimit -n 256 && exec "$0" "$@"',
          process.execPath,
          BIN,
          'serve',
          '--port',
          '0',
          '--admin-token',
          TOKEN,
        ],
        { stdio: ['ignore', 'pipe', 'pipe'] },
      );
      let out = '';
      let err = '';
      child.stdout.on('data', (chunk) => {
        out += chunk;
        const match = /listening on (http:\/\/\S+)/.exec(out);
        if (match?.[1]) {
          resolve({ url: match[1], child, stdout: () => out, stderr: () => err, exited });
        }
      });
      child.stderr.on('data', (chunk) => {
        err += chunk;
      });
      const exited = new Promise<number | string>((done) =>
        child.on('exit', (code, signal) => done(code ?? signal ?? 'unknown')),
      );
      exited.then((code) => reject(new Error(`serve exited (${code}):\n${out}\n${err}`)));
    });
    running.push(sandbox);
    expect(sandbox.stdout()).toMatch(/at most 64 connections at once \(open-file limit 256\)/);
    const { apiKey } = await registerOver(sandbox.url);
    const first = await openRaw(sandbox.url);
    // Far more sockets than the process has file descriptors for.
    const flood = await Promise.all(
      Array.from({ length: 300 }, () => openRaw(sandbox.url).catch(() => undefined)),
    );
    await new Promise((resolve) => setTimeout(resolve, 300));
    const open = flood.filter((connection) => connection && !connection.socket.destroyed);
    expect(open.length).toBeLessThanOrEqual(64);
    // A deposit on a connection the server holds succeeds: the write path needs no new descriptor.
    const body = JSON.stringify({ vault_id: 'moderate', amount_usdc: 1 });
    first.socket.write(
      `POST /api/v1/agent/vault/deposit HTTP/1.1\r\nHost: x\r\nX-API-Key: ${apiKey}\r\n` +
        `Content-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`,
    );
    const answer = await first.waitFor('deposit_tx');
    expect(answer).toContain('HTTP/1.1 200');
    for (const connection of [first, ...flood]) connection?.socket.destroy();
    expect(sandbox.stderr()).not.toContain('EMFILE');
  });
});

describe('shutdown', () => {
  it('exits at once on SIGTERM right after a registration, its agent funded first', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'agentctl-limits-'));
    dirs.push(dir);
    const state = join(dir, 'state');
    const sandbox = await serve(['--state', state]);
    const { apiKey } = await registerOver(sandbox.url);
    // The new agent may still be waiting for its funding block when the signal arrives.
    const signalled = Date.now();
    sandbox.child.kill('SIGTERM');
    expect(await sandbox.exited).toBe(0);
    // Not the 5 s the onboarding's shutdown wait once held the process for after exit.
    expect(Date.now() - signalled).toBeLessThan(3_000);
    running.splice(running.indexOf(sandbox), 1);
    const again = await serve(['--state', state]);
    const wallet = await fetch(`${again.url}/api/v1/agent/wallet`, {
      headers: { 'x-api-key': apiKey },
    });
    expect(wallet.status).toBe(200);
  });

  it('on SIGTERM finishes the request in flight, answers others 503, and exits at once', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'agentctl-limits-'));
    dirs.push(dir);
    const state = join(dir, 'state');
    const sandbox = await serve(['--state', state]);
    const { apiKey } = await registerOver(sandbox.url);
    // A keep-alive connection that has served a request, and one with a request half sent.
    const inFlight = await openRaw(sandbox.url);
    const idle = await openRaw(sandbox.url);
    for (const connection of [inFlight, idle]) {
      connection.socket.write('GET /health HTTP/1.1\r\nHost: x\r\n\r\n');
      await connection.waitFor('"status"');
    }
    const late = await openRaw(sandbox.url);
    late.socket.write('GET /health HTTP/1.1\r\nHost: x\r\n');
    // A deposit whose body is only half sent when SIGTERM arrives.
    const body = JSON.stringify({ vault_id: 'moderate', amount_usdc: 2 });
    const half = Math.floor(body.length / 2);
    const before = inFlight.received().length;
    inFlight.socket.write(
      `POST /api/v1/agent/vault/deposit HTTP/1.1\r\nHost: x\r\nX-API-Key: ${apiKey}\r\n` +
        `Content-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body.slice(0, half)}`,
    );
    await new Promise((resolve) => setTimeout(resolve, 200));
    const idleBefore = idle.received().length;
    sandbox.child.kill('SIGTERM');
    // The idle keep-alive connection is closed at once, without an answer.
    await idle.closed;
    expect(idle.received().length).toBe(idleBefore);
    // A request that arrives now is refused, in the contract's shape.
    late.socket.write('\r\n');
    await late.closed;
    const refusal = parseAnswer(late.received());
    expect(refusal.status).toBe(503);
    expectErrorShape(refusal.body);
    // The deposit in flight completes, and the process exits promptly after answering it.
    inFlight.socket.write(body.slice(half));
    await inFlight.waitFor('deposit_tx');
    const answeredAt = Date.now();
    expect(inFlight.received().slice(before)).toContain('HTTP/1.1 200');
    expect(await sandbox.exited).toBe(0);
    // The target is 2 s; the bound leaves room for a loaded CI machine, far below the
    // 5 s keep-alive timeout the process would otherwise wait out.
    expect(Date.now() - answeredAt).toBeLessThan(4_000);
    running.splice(running.indexOf(sandbox), 1);
    // The state was released: a new serve takes it at once, with the deposit in it.
    const again = await serve(['--state', state]);
    const positions = await fetch(`${again.url}/api/v1/agent/vault/positions`, {
      headers: { 'x-api-key': apiKey },
    });
    expect(positions.status).toBe(200);
    expect(JSON.stringify(await positions.json())).toContain('moderate');
  });
});
