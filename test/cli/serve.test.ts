import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { connect, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { NonceResponse, SandboxInfo } from '../../src/api/schemas/index.ts';
import { registerOver, type ServeProcess, serveFailure, startServe } from '../helpers/serve.ts';

let dir: string;
const running: ServeProcess[] = [];
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'agentctl-serve-test-'));
});
afterEach(async () => {
  // Gracefully, so each serve stops its anvil; a test that kill -9s restarts on the same
  // state, and that restart stops the orphaned anvil.
  for (const serve of running.splice(0)) {
    serve.child.kill('SIGTERM');
    await serve.exited;
  }
  rmSync(dir, { recursive: true, force: true });
});

async function serve(args: string[], env: NodeJS.ProcessEnv = {}) {
  const started = await startServe(args, env);
  running.push(started);
  return started;
}

/** Status of an authenticated read with `apiKey`: 200 if the key is known, 401 if not. */
async function statusWithKey(url: string, apiKey: string) {
  const response = await fetch(`${url}/api/v1/agent/wallet`, { headers: { 'x-api-key': apiKey } });
  return response.status;
}

describe('agentctl serve', () => {
  it('prints the listening line and a generated admin token that works', async () => {
    const sandbox = await serve(['--log-level', 'silent']);
    expect(sandbox.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    const token = /admin token: (\S+)/.exec(sandbox.stdout())?.[1];
    expect(token).toBeDefined();
    const info = await fetch(`${sandbox.url}/sandbox/info`, {
      headers: { 'x-admin-token': token as string },
    });
    expect(info.status).toBe(200);
    expect(SandboxInfo.parse(await info.json()).chain_id).toBe(84532);
  });

  it('takes the admin token from AGENTCTL_ADMIN_TOKEN and does not print it', async () => {
    const sandbox = await serve([], { AGENTCTL_ADMIN_TOKEN: 'from-the-environment' });
    expect(sandbox.stdout()).not.toContain('from-the-environment');
    const info = await fetch(`${sandbox.url}/sandbox/info`, {
      headers: { 'x-admin-token': 'from-the-environment' },
    });
    expect(info.status).toBe(200);
  });

  it('--log-format human logs one short line per request, still without secrets', async () => {
    const sandbox = await serve(['--log-format', 'human']);
    await fetch(`${sandbox.url}/health`);
    await fetch(`${sandbox.url}/api/v1/agents?limit=3&api_key=agk_${'d'.repeat(64)}`);
    sandbox.child.kill('SIGTERM');
    await sandbox.exited;
    running.splice(running.indexOf(sandbox), 1);
    const log = sandbox.stderr();
    expect(log).toMatch(/^GET \/health 200 \d+ ms$/m);
    expect(log).toMatch(/^GET \/api\/v1\/agents\?limit=3&api_key=\[redacted\] 200 \d+ ms$/m);
    expect(log).not.toContain('{"level"');
    expect(log).not.toContain('d'.repeat(64));
  });

  it('keeps the admin token with --state, hashed: printed once, valid across restarts', async () => {
    const state = join(dir, 'state');
    const status = (url: string, token: string) =>
      fetch(`${url}/sandbox/info`, { headers: { 'x-admin-token': token } }).then((r) => r.status);
    const stop = async (sandbox: ServeProcess) => {
      sandbox.child.kill('SIGTERM');
      await sandbox.exited;
      running.splice(running.indexOf(sandbox), 1);
    };
    const first = await serve(['--state', state, '--log-level', 'silent']);
    const token = /admin token: (\S+)/.exec(first.stdout())?.[1] as string;
    expect(token).toMatch(/^[A-Za-z0-9_-]{32}$/);
    await stop(first);
    // Only its hash is on disk.
    for (const file of readdirSync(state)) {
      const path = join(state, file);
      if (statSync(path).isFile()) expect(readFileSync(path).includes(token)).toBe(false);
    }

    const second = await serve(['--state', state, '--log-level', 'silent']);
    expect(second.stdout()).not.toContain(token);
    expect(second.stdout()).toContain('admin token: the one printed at its first start');
    expect(await status(second.url, token)).toBe(200);
    expect(await status(second.url, 'something-else-entirely')).toBe(401);
    await stop(second);

    // A token given replaces the kept one.
    const third = await serve(['--state', state, '--log-level', 'silent'], {
      AGENTCTL_ADMIN_TOKEN: 'a-new-admin-token',
    });
    expect(await status(third.url, 'a-new-admin-token')).toBe(200);
    expect(await status(third.url, token)).toBe(401);
  });

  it('shuts down gracefully on SIGTERM and SIGINT, removing a temporary state dir', async () => {
    for (const signal of ['SIGTERM', 'SIGINT'] as const) {
      const sandbox = await serve([]);
      const stateDir = /state: (\S+)/.exec(sandbox.stdout())?.[1] as string;
      expect(existsSync(stateDir)).toBe(true);
      sandbox.child.kill(signal);
      expect(await sandbox.exited).toBe(0);
      expect(existsSync(stateDir)).toBe(false);
    }
  });

  it('names its own address in the nonce message, whatever Host the client sends', async () => {
    const sandbox = await serve(['--log-level', 'silent']);
    const { port, hostname } = new URL(sandbox.url);
    const wallet = privateKeyToAccount(generatePrivateKey()).address;
    // fetch will not send a forged Host header, so speak HTTP by hand.
    const raw = await new Promise<string>((resolve, reject) => {
      let received = '';
      const socket = connect(Number(port), hostname, () =>
        socket.write(
          `GET /api/v1/agent/auth/nonce?wallet=${wallet} HTTP/1.0\r\nHost: evil.example\r\n\r\n`,
        ),
      );
      socket.on('data', (chunk) => {
        received += chunk;
      });
      socket.on('end', () => resolve(received));
      socket.on('error', reject);
    });
    const body = NonceResponse.parse(JSON.parse(raw.split('\r\n\r\n')[1] ?? ''));
    expect(body.message.startsWith(`127.0.0.1:${port} wants you to sign in`)).toBe(true);
  });

  it('keeps everything across a restart with the same --state', async () => {
    const state = join(dir, 'state');
    const first = await serve(['--state', state, '--admin-token', 't']);
    const { account, apiKey } = await registerOver(first.url);
    await fetch(`${first.url}/sandbox/clock/advance`, {
      method: 'POST',
      headers: { 'x-admin-token': 't', 'content-type': 'application/json' },
      body: JSON.stringify({ seconds: 7200 }),
    });
    first.child.kill('SIGTERM');
    expect(await first.exited).toBe(0);
    expect(existsSync(state)).toBe(true);

    const second = await serve(['--state', state, '--admin-token', 't']);
    const lookup = await (
      await fetch(`${second.url}/api/v1/agent/auth/lookup?wallet=${account.address}`)
    ).json();
    expect(lookup).toMatchObject({ registered: true, agent_name: 'Durable Agent' });
    expect(await statusWithKey(second.url, apiKey)).toBe(200);
    const info = SandboxInfo.parse(
      await (
        await fetch(`${second.url}/sandbox/info`, { headers: { 'x-admin-token': 't' } })
      ).json(),
    );
    // A restart within the second of the last block moves the clock one second on, so that
    // chain time never stands still or goes back.
    expect(info.clock.offset_seconds).toBeGreaterThanOrEqual(7200);
    expect(info.clock.offset_seconds).toBeLessThanOrEqual(7201);
    expect(info.persistent).toBe(true);
    // State is private to its owner.
    expect(statSync(state).mode & 0o777).toBe(0o700);
    const checkpoints = readdirSync(join(state, 'chain'));
    expect(checkpoints).toEqual([expect.stringMatching(/^checkpoint-\d+\.json$/)]);
    expect(statSync(join(state, 'chain')).mode & 0o777).toBe(0o700);
    for (const file of [
      'sandbox.db',
      'sandbox.db-wal',
      'agentctl-state.json',
      'wallet.mnemonic',
      `chain/${checkpoints[0]}`,
      'anvil.pid',
      'serve.pid',
    ]) {
      expect(statSync(join(state, file)).mode & 0o777).toBe(0o600);
    }
  });

  it('keeps an acknowledged API key through kill -9', async () => {
    const state = join(dir, 'state');
    const first = await serve(['--state', state]);
    const { apiKey } = await registerOver(first.url);
    first.child.kill('SIGKILL');
    expect(await first.exited).toBe('SIGKILL');

    const second = await serve(['--state', state]);
    expect(await statusWithKey(second.url, apiKey)).toBe(200);
    const altered = apiKey.slice(0, -1) + (apiKey.endsWith('0') ? '1' : '0');
    expect(await statusWithKey(second.url, altered)).toBe(401);
  });

  it('refuses a state dir with another format version', async () => {
    const state = join(dir, 'state');
    mkdirSync(state);
    writeFileSync(join(state, 'agentctl-state.json'), '{"format": 99}\n');
    const result = await serveFailure(['--port', '0', '--state', state]);
    expect(result.code).toBe(1);
    expect(result.stderr).toContain('format version 99');
    expect(result.stderr).toContain('format 4');
    expect(result.stderr).not.toMatch(/\n\s+at /);
  });

  it('refuses a format-2 state dir, saying why it cannot be read', async () => {
    const state = join(dir, 'state');
    mkdirSync(state);
    writeFileSync(join(state, 'agentctl-state.json'), '{"format": 2}\n');
    writeFileSync(join(state, 'chain-snapshot.json'), '{}');
    const result = await serveFailure(['--port', '0', '--state', state]);
    expect(result.code).toBe(1);
    expect(result.stderr).toContain(`state directory ${state} has format version 2`);
    expect(result.stderr).toContain('start with a new --state directory');
    // Nothing was touched: the old state is still there for the agentctl that wrote it.
    expect(readdirSync(state).sort()).toEqual(['agentctl-state.json', 'chain-snapshot.json']);
  });

  it('refuses a format-3 state dir (contracts without the data API’s events)', async () => {
    const state = join(dir, 'state');
    mkdirSync(state);
    writeFileSync(join(state, 'agentctl-state.json'), '{"format": 3, "sandbox_id": "old"}\n');
    const result = await serveFailure(['--port', '0', '--state', state]);
    expect(result.code).toBe(1);
    expect(result.stderr).toContain('has format version 3');
    expect(result.stderr).toContain('ERC-7540');
    expect(readdirSync(state)).toEqual(['agentctl-state.json']);
  });

  it('refuses a non-empty directory that is not a state dir', async () => {
    writeFileSync(join(dir, 'notes.txt'), 'mine');
    const result = await serveFailure(['--port', '0', '--state', dir]);
    expect(result.code).toBe(1);
    expect(result.stderr).toContain('is not an agentctl state directory');
  });

  it('refuses a second serve on a state dir in use', async () => {
    const state = join(dir, 'state');
    await serve(['--state', state]);
    const result = await serveFailure(['--port', '0', '--state', state]);
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/another agentctl serve \(pid \d+\) is using/);
  });

  it('reports a busy port in one line', async () => {
    const blocker = createServer();
    await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve));
    const port = (blocker.address() as { port: number }).port;
    try {
      const result = await serveFailure(['--port', String(port)]);
      expect(result.code).toBe(1);
      expect(result.stderr.trim()).toBe(
        `agentctl: port ${port} on 127.0.0.1 is already in use: choose another with --port, or --port 0 for a free one`,
      );
    } finally {
      blocker.close();
    }
  });

  it.each([
    [['--port', 'http'], 'agentctl: --port http: must be an integer from 0 to 65535'],
    [['--rate-limit', 'maybe'], 'agentctl: --rate-limit maybe: must be one of on, off'],
    [['--admin-token', ''], 'the admin token (--admin-token or AGENTCTL_ADMIN_TOKEN) is empty'],
  ])('exits 2 on bad options %j', async (args, message) => {
    const result = await serveFailure(args);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain(message);
  });

  it('exits 2 on an AGENTCTL_CHECKPOINTS it does not know, rather than ignore it', async () => {
    const result = await serveFailure([], { AGENTCTL_CHECKPOINTS: 'off' });
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('AGENTCTL_CHECKPOINTS=off is not a checkpoint mode');
  });

  it('never writes an API key, the admin token or the mnemonic to its log or answers', async () => {
    const state = join(dir, 'state');
    const sandbox = await serve([
      '--log-level',
      'trace',
      '--admin-token',
      'very-secret-admin',
      '--state',
      state,
    ]);
    const { apiKey } = await registerOver(sandbox.url);
    expect(await statusWithKey(sandbox.url, apiKey)).toBe(200);
    const info = await (
      await fetch(`${sandbox.url}/sandbox/info`, {
        headers: { 'x-admin-token': 'very-secret-admin' },
      })
    ).text();
    sandbox.child.kill('SIGTERM');
    await sandbox.exited;
    const mnemonic = readFileSync(join(state, 'wallet.mnemonic'), 'utf8').trim();
    expect(mnemonic.split(' ')).toHaveLength(24);
    // Any three words in a row, wherever in the phrase, and however spaced or cased: part of
    // a mnemonic is as much a leak as all of it.
    const words = mnemonic.split(' ');
    for (const output of [sandbox.stdout(), sandbox.stderr(), info]) {
      const text = output.toLowerCase().replace(/[^a-z]+/g, ' ');
      for (let i = 0; i + 3 <= words.length; i++) {
        expect(text).not.toContain(words.slice(i, i + 3).join(' '));
      }
    }
    expect(sandbox.stderr()).toContain('incoming request');
    expect(sandbox.stderr()).not.toContain(apiKey);
    expect(sandbox.stderr()).not.toContain(apiKey.slice(4));
    expect(sandbox.stderr()).not.toContain('very-secret-admin');
  });

  it('applies the rate limits unless --rate-limit off', async () => {
    const limited = await serve([]);
    const statuses: number[] = [];
    for (let i = 0; i < 61; i++) statuses.push((await fetch(`${limited.url}/health`)).status);
    expect(statuses.at(-1)).toBe(429);

    const unlimited = await serve(['--rate-limit', 'off']);
    for (let i = 0; i < 70; i++) expect((await fetch(`${unlimited.url}/health`)).status).toBe(200);
  });
});
