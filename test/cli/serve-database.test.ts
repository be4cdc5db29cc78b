import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type FreshDatabase, freshDatabase } from '../helpers/postgres.ts';
import { depositOver, registerOver, serveFailure, useServes } from '../helpers/serve.ts';

/**
 * `agentctl serve --database URL` (issue 25 §1): the built binary, a real anvil and the run's
 * throwaway PostgreSQL. The whole sandbox is in the database: a writer started after another
 * stopped (a new process, a new work dir) serves the same agents, balances and index.
 */
const TOKEN = 'database-test-admin';
const SECRET = 'database-test-secret-0123456789';
/** In the URL, never to be shown: the cluster trusts loopback, so it is not even checked. */
const PASSWORD = 'pw-never-shown-4711';
const serves = useServes('serve-database', TOKEN);

let db: FreshDatabase;
let url: string;
beforeAll(async () => {
  db = await freshDatabase();
  const withPassword = new URL(db.url);
  withPassword.password = PASSWORD;
  url = withPassword.toString();
});
afterAll(() => db?.drop());

const writer = (args: string[] = []) =>
  serves.serve(['--database', url, '--rate-limit', 'off', ...args], {
    AGENTCTL_SANDBOX_SECRET: SECRET,
  });

async function getJson(address: string) {
  const response = await fetch(address);
  expect(response.status).toBe(200);
  // biome-ignore lint/suspicious/noExplicitAny: checked field by field
  return (await response.json()) as any;
}

async function graphql(base: string, query: string) {
  const response = await fetch(`${base}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ query }),
  });
  expect(response.status).toBe(200);
  // biome-ignore lint/suspicious/noExplicitAny: checked field by field
  return ((await response.json()) as any).data;
}

/** What a reader sees of one agent: its wallet, balances, position and history, by every API. */
async function seenOf(base: string, apiKey: string) {
  const wallet = await serves.request(base, 'GET', '/api/v1/agent/wallet', undefined, apiKey);
  expect(wallet.status).toBe(200);
  const address = wallet.body.agent_address as string;
  const transactions = await getJson(`${base}/v1/users/${address}/transactions`);
  const positions = await getJson(`${base}/v1/users/${address}/positions`);
  const viaGraphql = await graphql(
    base,
    `{ userPositions(address: "${address}") { shares }
       userTransactions(address: "${address}") { hash type amount timestamp } }`,
  );
  return { wallet: wallet.body, transactions, positions, viaGraphql };
}

describe('serve --database', () => {
  it('keeps the whole sandbox in the database: a writer started after another stopped serves the same agents, balances and index', async () => {
    const first = await writer();
    const info = (await serves.request(first.url, 'GET', '/sandbox/info')).body;
    expect(info).toMatchObject({ persistent: true });
    const { apiKey } = await registerOver(first.url);
    await depositOver(first.url, apiKey, 25);
    await depositOver(first.url, apiKey, 5);
    const before = await seenOf(first.url, apiKey);
    expect(before.transactions.total).toBe(2);
    expect(before.viaGraphql.userTransactions).toHaveLength(2);
    // The ready block names the database without its password; nothing else shows it.
    expect(first.stdout()).toMatch(/^state: postgres:\/\/agentctl:\*\*\*@/m);
    expect(first.stdout()).toMatch(
      /^work dir: \S+ \(this writer's anvil files, removed at exit\)/m,
    );
    const workDir = /^work dir: (\S+)/m.exec(first.stdout())?.[1] as string;
    await serves.stop(first);
    expect(`${first.stdout()}${first.stderr()}`).not.toContain(PASSWORD);
    const { existsSync } = await import('node:fs');
    expect(existsSync(workDir)).toBe(false);

    const second = await writer();
    expect(/^work dir: (\S+)/m.exec(second.stdout())?.[1]).not.toBe(workDir);
    expect(await seenOf(second.url, apiKey)).toEqual(before);
    // And it goes on from there: the same agent's next write is its third.
    await depositOver(second.url, apiKey, 1);
    expect((await seenOf(second.url, apiKey)).transactions.total).toBe(3);
    await serves.stop(second);
    expect(`${second.stdout()}${second.stderr()}`).not.toContain(PASSWORD);
  });
});

describe('serve --database refuses', () => {
  it('a URL that is not PostgreSQL, and the options of a state dir, with exit 2 and without the password', async () => {
    const env = { AGENTCTL_SANDBOX_SECRET: SECRET };
    const mysql = await serveFailure(['--database', `mysql://me:${PASSWORD}@db/x`], env);
    expect(mysql.code).toBe(2);
    expect(mysql.stderr).toContain('--database mysql://me:***@db/x is a mysql:// URL');
    expect(mysql.stderr).not.toContain(PASSWORD);
    const withState = await serveFailure(['--database', url, '--state', '/tmp/x'], env);
    expect(withState.code).toBe(2);
    expect(withState.stderr).toContain('--database cannot be used with --state');
    expect(withState.stderr).not.toContain(PASSWORD);
    const fromEnv = await serveFailure(['--state', '/tmp/x'], {
      ...env,
      AGENTCTL_DATABASE_URL: url,
    });
    expect(fromEnv.code).toBe(2);
    expect(fromEnv.stderr).toContain('AGENTCTL_DATABASE_URL cannot be used with --state');
    const advertise = await serveFailure(['--advertise-url', 'http://10.0.0.5:8787'], env);
    expect(advertise.code).toBe(2);
    expect(advertise.stderr).toContain('--advertise-url');
  });
});
