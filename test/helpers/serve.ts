import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { afterEach, beforeEach, expect } from 'vitest';
import { NonceResponse, RegisterResponse } from '../../src/api/schemas/index.ts';
import { anvilsStartedFor } from '../../src/sandbox/chain/anvil.ts';
import { type FreshDatabase, freshDatabase, TEST_SANDBOX_SECRET, testBackend } from './postgres.ts';

export const BIN = fileURLToPath(new URL('../../bin/agentctl.js', import.meta.url));

export interface ServeProcess {
  url: string;
  child: ChildProcess;
  stdout(): string;
  stderr(): string;
  /** Resolves with the exit code (or signal name) once the process has ended. */
  exited: Promise<number | string>;
}

/** Runs the built `agentctl serve` and waits for its ready line. */
export function startServe(args: string[], env: NodeJS.ProcessEnv = {}): Promise<ServeProcess> {
  const child = spawn(process.execPath, [BIN, 'serve', '--port', '0', ...args], {
    env: { ...process.env, AGENTCTL_ADMIN_TOKEN: undefined, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout?.on('data', (chunk) => {
    out += chunk;
  });
  child.stderr?.on('data', (chunk) => {
    err += chunk;
  });
  const exited = new Promise<number | string>((resolve) => {
    child.on('exit', (code, signal) => resolve(code ?? signal ?? 'unknown'));
  });
  return new Promise((resolve, reject) => {
    const onData = () => {
      const match = /listening on (http:\/\/\S+)/.exec(out);
      if (match?.[1]) {
        child.stdout?.off('data', onData);
        resolve({ url: match[1], child, stdout: () => out, stderr: () => err, exited });
      }
    };
    child.stdout?.on('data', onData);
    exited.then((code) =>
      reject(new Error(`serve exited (${code}) before it was ready:\n${out}\n${err}`)),
    );
  });
}

/** Runs `agentctl serve` expecting it to fail at start; returns its exit code and output. */
export function serveFailure(
  args: string[],
  env: NodeJS.ProcessEnv = {},
): Promise<{ code: number | null; stderr: string }> {
  const child = spawn(process.execPath, [BIN, 'serve', ...args], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let err = '';
  child.stderr?.on('data', (chunk) => {
    err += chunk;
  });
  return new Promise((resolve) => child.on('exit', (code) => resolve({ code, stderr: err })));
}

/** One JSON-RPC call to a node; an error answer throws. */
export async function rpcCall(url: string, method: string, params: unknown[] = []) {
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
  });
  const body = (await response.json()) as { result?: unknown; error?: { message: string } };
  if (body.error) throw new Error(`${method}: ${body.error.message}`);
  return body.result;
}

/** Registers a new wallet over HTTP with a running serve; fails unless the answer is 200. */
export async function registerOver(url: string, agentName = 'Durable Agent') {
  const account = privateKeyToAccount(generatePrivateKey());
  const nonce = NonceResponse.parse(
    await (await fetch(`${url}/api/v1/agent/auth/nonce?wallet=${account.address}`)).json(),
  );
  const response = await fetch(`${url}/api/v1/agent/auth/register`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      wallet_address: account.address,
      signature: await account.signMessage({ message: nonce.message }),
      nonce: nonce.nonce,
      agent_name: agentName,
      operator_address: account.address,
    }),
  });
  if (response.status !== 200)
    throw new Error(`register answered ${response.status}: ${await response.text()}`);
  return { account, apiKey: RegisterResponse.parse(await response.json()).api_key };
}

/**
 * Waits until `check` holds, looking every 25 ms; a check that throws counts as not yet.
 * Throws after `timeoutMs`, saying so, rather than leave the test's own timeout to say less.
 */
export async function until(
  check: () => Promise<boolean> | boolean,
  timeoutMs = 30_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (
    !(await Promise.resolve()
      .then(check)
      .catch(() => false))
  ) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

/** Deposits `amount` USDC into the moderate vault as the agent with `apiKey`; expects a 200. */
export async function depositOver(url: string, apiKey: string, amount: number) {
  const answer = await requestOver(
    url,
    '',
    'POST',
    '/api/v1/agent/vault/deposit',
    { vault_id: 'moderate', amount_usdc: amount },
    apiKey,
  );
  expect(answer.body).toMatchObject({ deposit_tx: expect.any(String) });
  expect(answer.status).toBe(200);
  return answer.body as { deposit_tx: Hex; shares_balance: string; agent_address: string };
}

/**
 * A JSON request to a running serve, with the admin token and, when given, an API key.
 * The body is returned untyped: tests check it field by field.
 */
export async function requestOver(
  url: string,
  adminToken: string,
  method: string,
  path: string,
  body?: object,
  apiKey?: string,
) {
  const response = await fetch(`${url}${path}`, {
    method,
    headers: {
      ...(body ? { 'content-type': 'application/json' } : {}),
      ...(apiKey ? { 'x-api-key': apiKey } : {}),
      'x-admin-token': adminToken,
    },
    ...(body ? { body: JSON.stringify(body) } : {}),
  });
  // biome-ignore lint/suspicious/noExplicitAny: test responses are checked field by field
  return { status: response.status, body: (await response.json()) as any };
}

/**
 * For a test file whose tests start serves: a fresh directory for each test, and every serve
 * started through `serve` stopped (SIGTERM) after its test, before the directory is removed.
 */
export function useServes(name: string, adminToken: string) {
  let dir = '';
  const running: ServeProcess[] = [];
  /** On the PostgreSQL backend: the test's database, made by its first stateServe. */
  let database: FreshDatabase | undefined;
  /** The work dirs of the test's serves on a database (their anvils' files). */
  const workDirs = new Set<string>();
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), `agentctl-${name}-`));
  });
  afterEach(async () => {
    for (const serve of running.splice(0)) {
      serve.child.kill('SIGTERM');
      await serve.exited;
    }
    // The anvil of a serve a test killed with kill -9 outlives it, as it would for a user.
    for (const anvils of [join(dir, 'state'), ...workDirs]) {
      for (const pid of anvilsStartedFor(anvils)) process.kill(pid, 'SIGKILL');
    }
    workDirs.clear();
    rmSync(dir, { recursive: true, force: true });
    await database?.drop();
    database = undefined;
  });
  /** Where a serve's anvil keeps its pid file: the state dir, or a writer's work dir. */
  const anvilDir = (serve: ServeProcess): string => {
    const workDir = /^work dir: (\S+)/m.exec(serve.stdout())?.[1];
    return workDir ?? join(dir, 'state');
  };
  const forget = (serve: ServeProcess) => {
    const index = running.indexOf(serve);
    // Not one of ours (or forgotten already): splice(-1, 1) would drop another serve, which
    // would then outlive its test.
    if (index === -1) throw new Error('this serve was not started by serve(), or was forgotten');
    running.splice(index, 1);
  };
  const state = () => join(dir, 'state');
  return {
    /** This test's directory. */
    dir: () => dir,
    /** The test's state dir (`--state`), in its directory: see stateServe. */
    state,
    /**
     * serve on the test's state, rate limits off: the same sandbox across the serves of a test
     * (a kill -9, then a restart, say). The state is the test's state dir, or on the
     * PostgreSQL backend (testBackend()) the test's database (`--database`).
     */
    async stateServe(env: NodeJS.ProcessEnv = {}, args: string[] = []): Promise<ServeProcess> {
      if (testBackend() === 'postgres') database ??= await freshDatabase();
      const where = database ? ['--database', database.url] : ['--state', state()];
      const started = await startServe(
        [
          ...[...where, '--admin-token', adminToken, '--log-level', 'warn'],
          ...['--rate-limit', 'off', ...args],
        ],
        { ...(database && { AGENTCTL_SANDBOX_SECRET: TEST_SANDBOX_SECRET }), ...env },
      );
      running.push(started);
      const workDir = /^work dir: (\S+)/m.exec(started.stdout())?.[1];
      if (workDir) workDirs.add(workDir);
      return started;
    },
    anvilDir,
    async serve(args: string[], env: NodeJS.ProcessEnv = {}): Promise<ServeProcess> {
      const started = await startServe(
        ['--admin-token', adminToken, '--log-level', 'warn', ...args],
        env,
      );
      running.push(started);
      return started;
    },
    /** Stops a serve and waits for it to exit. */
    async stop(serve: ServeProcess, signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
      serve.child.kill(signal);
      await serve.exited;
      forget(serve);
    },
    /** A serve the test stopped itself. */
    forget,
    /** A JSON request with the admin token (and an API key when given). */
    request: (url: string, method: string, path: string, body?: object, key?: string) =>
      requestOver(url, adminToken, method, path, body, key),
  };
}
