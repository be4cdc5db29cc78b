import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli, spawnCli as spawnAgentctl } from '../helpers/cli.ts';
import {
  registerOver,
  requestOver,
  type ServeProcess,
  startServe,
  until,
} from '../helpers/serve.ts';

const ADMIN = 'watch-admin';
let sandbox: ServeProcess;
let dir: string;
let apiKey: string;

/** serve on this file's state dir, on `port` if given (a restart keeps the URL). */
const startSandbox = (port?: string) =>
  startServe([
    '--admin-token',
    ADMIN,
    '--log-level',
    'warn',
    '--rate-limit',
    'off',
    '--state',
    join(dir, 'state'),
    ...(port ? ['--port', port] : []),
  ]);

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'agentctl-watch-'));
  sandbox = await startSandbox();
  ({ apiKey } = await registerOver(sandbox.url, 'Watch Agent'));
});
afterAll(async () => {
  sandbox.child.kill('SIGTERM');
  await sandbox.exited;
  rmSync(dir, { recursive: true, force: true });
});

const env = () => ({
  AGENTCTL_CONFIG_DIR: dir,
  AGENTCTL_BASE_URL: sandbox.url,
  AGENTCTL_API_KEY: apiKey,
});

/** The built agentctl in the background, against this test's sandbox. */
const spawnCli = (args: string[]) => spawnAgentctl(args, env());

/** Open subscriptions, as /sandbox/info counts them. */
async function subscriptions(): Promise<number> {
  const info = await requestOver(sandbox.url, ADMIN, 'GET', '/sandbox/info');
  return info.body.graphql.subscriptions;
}

async function deposit(vault_id: string, amount_usdc: number): Promise<string> {
  const response = await requestOver(
    sandbox.url,
    ADMIN,
    'POST',
    '/api/v1/agent/vault/deposit',
    { vault_id, amount_usdc },
    apiKey,
  );
  expect(response.status).toBe(200);
  return response.body.deposit_tx;
}

describe('agentctl watch against serve', () => {
  it('transactions --json streams one JSON object per line and stops after --count', async () => {
    const before = await subscriptions();
    const watch = spawnCli([
      '--json',
      'watch',
      'transactions',
      '--vault',
      'moderate',
      '--count',
      '2',
    ]);
    await until(async () => (await subscriptions()) > before);
    await deposit('conservative', 1); // another vault: not shown
    const first = await deposit('moderate', 2);
    // Flushed as it arrives: the first line is there before the second deposit.
    await until(() => watch.stdout().includes(first));
    const second = await deposit('moderate', 3);
    expect(await watch.exited).toBe(0);
    const lines = watch
      .stdout()
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line));
    expect(lines.map((event) => event.hash)).toEqual([first, second]);
    expect(lines[0]).toMatchObject({ type: 'DEPOSIT', status: 'FULFILLED', amount: '2000000' });
    expect(lines[0].vault.name).toBe('Moderate USDC Vault');
    // Its subscription is freed once it has exited (the next test counts from here).
    await until(async () => (await subscriptions()) === before);
  });

  it('vault prints a line per update; Ctrl-C ends it with exit 130', async () => {
    const before = await subscriptions();
    const watch = spawnCli(['watch', 'vault', 'aggressive', '--wide']);
    await until(async () => (await subscriptions()) > before);
    await deposit('aggressive', 5);
    await until(() => watch.stdout().includes('Aggressive USDC Vault'));
    expect(watch.stdout()).toMatch(
      /Aggressive USDC Vault {2}tvl 5(\.\d+)? USDC \(\d+ raw\) {2}price 1\.\d{6} {2}apy [\d.]+ %/,
    );
    watch.child.kill('SIGINT');
    expect(await watch.exited).toBe(130);
    await until(async () => (await subscriptions()) === before);
  });

  it('refuses an unknown vault id with exit 2, and an unreachable service with exit 6', async () => {
    const unknown = await runCli(['watch', 'vault', 'nonesuch'], env());
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toMatch(/must be one of conservative, moderate/);
    const missing = await runCli(['watch', 'vault', `0x${'12'.repeat(20)}`, '--count', '1'], env());
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain('NOT_FOUND');
    // The client's mistake is not logged as the server's (serve logs at warn and above here).
    expect(sandbox.stderr()).not.toMatch(/"level":50/);
    const gone = await runCli(['watch', 'transactions', '--data-url', 'http://127.0.0.1:9'], env());
    expect(gone.code).toBe(6);
  });

  it('reconnects with backoff when the service restarts, says so, and follows again', async () => {
    const port = new URL(sandbox.url).port;
    const before = await subscriptions();
    const watch = spawnCli(['--json', 'watch', 'transactions', '--count', '1']);
    await until(async () => (await subscriptions()) > before);
    sandbox.child.kill('SIGTERM');
    await sandbox.exited;
    await until(() => /lost; reconnecting in/.test(watch.stderr()));
    sandbox = await startSandbox(port);
    await until(() => /reconnected/.test(watch.stderr()), 20_000);
    // Subscribed again on the new serve before the event is made.
    await until(async () => (await subscriptions()) > 0);
    const tx = await deposit('moderate', 1);
    expect(await watch.exited).toBe(0);
    expect(JSON.parse(watch.stdout().trim()).hash).toBe(tx);
  });

  it('resumes when serve is killed (kill -9) and a new one starts on its port and state dir', async () => {
    const port = new URL(sandbox.url).port;
    const before = await subscriptions();
    const watch = spawnCli(['--json', 'watch', 'transactions', '--count', '1']);
    await until(async () => (await subscriptions()) > before);
    // No close frame: the socket just ends.
    sandbox.child.kill('SIGKILL');
    await sandbox.exited;
    await until(() => /lost; reconnecting in/.test(watch.stderr()));
    sandbox = await startSandbox(port);
    await until(() => /reconnected/.test(watch.stderr()), 20_000);
    await until(async () => (await subscriptions()) > 0);
    const tx = await deposit('moderate', 1);
    expect(await watch.exited).toBe(0);
    expect(JSON.parse(watch.stdout().trim()).hash).toBe(tx);
    expect(watch.stderr()).toMatch(/events while it was down are not replayed/);
  });
});

describe('agentctl watch and the rate tiers', () => {
  it('exits 5, saying so, when its tier is spent at connect', async () => {
    const limited = await startServe(['--admin-token', ADMIN, '--log-level', 'warn']);
    try {
      for (let i = 0; i < 60; i++) {
        expect((await fetch(`${limited.url}/v1/protocol/stats`)).status).toBe(200);
      }
      const watch = await runCli(['watch', 'transactions', '--count', '1'], {
        AGENTCTL_CONFIG_DIR: dir,
        AGENTCTL_BASE_URL: limited.url,
      });
      expect(watch.code).toBe(5);
      expect(watch.stderr).toMatch(/refused the connection: Rate limited: retry in \d+ s/);
    } finally {
      limited.child.kill('SIGTERM');
      await limited.exited;
    }
  });
});

describe('agentctl api graphql', () => {
  it('prints the response; variables are JSON or strings; errors exit by their code', async () => {
    const ok = await runCli(
      [
        'api',
        'graphql',
        '--query',
        'query ($n: Int) { strategies { id } userTransactions(address: "0x00000000000000000000000000000000000000aa", limit: $n) { hash } }',
        '--var',
        'n=5',
      ],
      env(),
    );
    expect(ok.code).toBe(0);
    expect(JSON.parse(ok.stdout)).toEqual({ data: { strategies: [], userTransactions: [] } });

    const vaults = await runCli(
      ['--json', 'api', 'graphql', '--query', '{ vaults { name } }'],
      env(),
    );
    expect(vaults.code).toBe(0);
    expect(JSON.parse(vaults.stdout).data.vaults).toHaveLength(6);

    const notFound = await runCli(
      [
        'api',
        'graphql',
        '--query',
        'query ($a: String!) { vault(address: $a) { name } }',
        '--var',
        `a=0x${'ab'.repeat(20)}`,
      ],
      env(),
    );
    expect(notFound.code).toBe(2);
    expect(JSON.parse(notFound.stdout).errors[0].extensions.code).toBe('NOT_FOUND');
    expect(notFound.stderr).toMatch(/^agentctl: NOT_FOUND: no vault at/m);

    const syntax = await runCli(['api', 'graphql', '--query', '{ vaults {'], env());
    expect(syntax.code).toBe(2);
    expect(syntax.stderr).toContain('GRAPHQL_PARSE_FAILED');
    // Under --json the error names REST's code, the GraphQL code and the HTTP status.
    const jsonSyntax = await runCli(['--json', 'api', 'graphql', '--query', '{ vaults {'], env());
    expect(jsonSyntax.code).toBe(2);
    expect(JSON.parse(jsonSyntax.stderr)).toEqual({
      error: expect.stringMatching(/^GRAPHQL_PARSE_FAILED: Syntax Error/),
      status: 400,
      code: 'bad_request',
      graphql_code: 'GRAPHQL_PARSE_FAILED',
    });

    const badVar = await runCli(
      ['api', 'graphql', '--query', '{ vaults { name } }', '--var', '=1'],
      env(),
    );
    expect(badVar.code).toBe(2);
    expect(badVar.stderr).toContain('expected name=value');
  });
});
