import { randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { LightMyRequestResponse } from 'fastify';
import pg from 'pg';
import { generatePrivateKey, type PrivateKeyAccount, privateKeyToAccount } from 'viem/accounts';
import { expect } from 'vitest';
import type {
  GraphqlLimits,
  NonceResponse,
  RegisterResponse,
} from '../../src/api/schemas/index.ts';
import { buildApp } from '../../src/sandbox/app.ts';
import { databaseCheckpoints } from '../../src/sandbox/chain/checkpoint-store.ts';
import type { SandboxChain } from '../../src/sandbox/chain/index.ts';
import { databaseMnemonic } from '../../src/sandbox/chain/mnemonic.ts';
import { createSandboxClock, type SandboxClock } from '../../src/sandbox/clock.ts';
import { hashAdminToken } from '../../src/sandbox/plugins/auth.ts';
import type { DataTiers } from '../../src/sandbox/plugins/rate-limit.ts';
import type { App } from '../../src/sandbox/routes/types.ts';
import {
  type RuntimeOptions,
  type SandboxRuntime,
  startRuntime,
} from '../../src/sandbox/runtime.ts';
import { SANDBOX_SECRET_ENV } from '../../src/sandbox/sandbox-secret.ts';
import { openStore, type Store } from '../../src/sandbox/store/index.ts';
import { openPostgresStore } from '../../src/sandbox/store/postgres.ts';
import { type FreshDatabase, freshDatabase, TEST_SANDBOX_SECRET, testBackend } from './postgres.ts';

export { TEST_SANDBOX_SECRET, testBackend };

export const ADMIN_TOKEN = 'test-admin-token';

const SILENT = { info() {}, warn() {}, error() {} };

export interface TestSandbox {
  app: App;
  store: Store;
  chain: SandboxChain;
  /** What owns the state: the index open now is runtime.parts.indexer(). */
  runtime: SandboxRuntime;
  clock: SandboxClock;
  dir: string;
  /** The PostgreSQL database it keeps its state in (none: SQLite files in `dir`). */
  database?: string;
  close(): Promise<void>;
}

/**
 * The real app on a real SQLite file in a fresh directory, with its own anvil and freshly
 * deployed contracts. Rate limits are off unless asked for.
 */
export async function createTestSandbox(
  options: {
    rateLimit?: boolean;
    /** Where rate limit windows are counted ('memory' unless asked). */
    rateLimitCounts?: 'memory' | 'database';
    trustProxy?: boolean;
    logger?: unknown;
    /** Runs before ready(), e.g. to add a route that injects a fault. */
    beforeReady?: (app: App) => void;
    dataTiers?: DataTiers;
    graphqlLimits?: Partial<GraphqlLimits>;
    graphiql?: boolean;
    /** The ERC-7540 fulfiller's bounds, smaller than its defaults to push past them. */
    fulfilment?: RuntimeOptions['fulfilment'];
    /** Where the chain's and the index's lines go (nowhere by default). */
    chainLog?: RuntimeOptions['log'];
    /** How long new blocks wait for an automatic checkpoint, if not the default. */
    checkpointAfterMs?: number;
    /** An existing node (serve --rpc-url) instead of the sandbox's own anvil. */
    rpcUrl?: string;
    /**
     * A PostgreSQL database (freshDatabase()'s url) to keep everything in: the rows, the
     * checkpoints, the mnemonic, the index and the snapshots; the directory then holds only
     * what anvil needs.
     */
    database?: string;
    /** SQLite whatever testBackend() says: for tests of SQLite's own files. */
    sqlite?: boolean;
  } = {},
): Promise<TestSandbox> {
  const owned: FreshDatabase | undefined =
    options.database === undefined && !options.sqlite && testBackend() === 'postgres'
      ? await freshDatabase()
      : undefined;
  if (owned) options = { ...options, database: owned.url };
  const dir = mkdtempSync(join(tmpdir(), 'agentctl-test-'));
  const store = options.database
    ? await openPostgresStore(options.database)
    : openStore(join(dir, 'sandbox.db'), { durable: false });
  const clock = await createSandboxClock(store.meta);
  // As serve does: a database has no state dir to say whose it is (an export checks it); one
  // started from an export has its sandbox's.
  const recorded = options.database ? await store.meta.get('sandbox_id') : undefined;
  const sandboxId = recorded ?? randomUUID();
  if (options.database && !recorded) await store.meta.set('sandbox_id', sandboxId);
  const runtime = await startRuntime({
    stateDir: dir,
    persistent: false,
    clock,
    store,
    sandboxId,
    log: options.chainLog ?? SILENT,
    ...(options.fulfilment && { fulfilment: options.fulfilment }),
    checkpointAfterMs: options.checkpointAfterMs,
    ...(options.rpcUrl && { rpcUrl: options.rpcUrl }),
    ...(options.database && {
      checkpoints: databaseCheckpoints(store.sql),
      mnemonic: databaseMnemonic(store.sql, { [SANDBOX_SECRET_ENV]: TEST_SANDBOX_SECRET }),
      indexStorage: { kind: 'postgres', url: options.database },
    }),
  });
  const { chain } = runtime;
  const app = await buildApp({
    store,
    clock,
    chain,
    index: runtime.index,
    onboarder: runtime.onboarder,
    adminTokenHash: hashAdminToken(ADMIN_TOKEN),
    snapshots: runtime.snapshots,
    stateDir: dir,
    persistent: false,
    rateLimit: options.rateLimit ?? false,
    ...(options.rateLimitCounts && { rateLimitCounts: options.rateLimitCounts }),
    trustProxy: options.trustProxy ?? false,
    logger: (options.logger ?? false) as false,
    connections: { maxConnections: 64, requestTimeoutMs: 30_000 },
    ...(options.dataTiers && { dataTiers: options.dataTiers }),
    ...(options.graphqlLimits && { graphqlLimits: options.graphqlLimits }),
    graphiql: options.graphiql ?? false,
  });
  options.beforeReady?.(app);
  await app.ready();
  return {
    app,
    store,
    chain,
    runtime,
    clock,
    dir,
    ...(options.database && { database: options.database }),
    async close() {
      await app.close();
      try {
        await runtime.close();
      } finally {
        rmSync(dir, { recursive: true, force: true });
        await owned?.drop();
      }
    },
  };
}

export function newAccount(): PrivateKeyAccount {
  return privateKeyToAccount(generatePrivateKey());
}

export const AGENT_FIELDS = {
  agent_name: 'Test Agent',
  operator_address: '0x000000000000000000000000000000000000dEaD',
};

export async function getNonce(app: App, wallet: string): Promise<NonceResponse> {
  const response = await app.inject({
    method: 'GET',
    url: `/api/v1/agent/auth/nonce?wallet=${wallet}`,
  });
  if (response.statusCode !== 200) throw new Error(`nonce failed: ${response.body}`);
  return response.json();
}

export function postRegister(app: App, body: unknown): Promise<LightMyRequestResponse> {
  return app.inject({
    method: 'POST',
    url: '/api/v1/agent/auth/register',
    payload: body as object,
  });
}

/** A register body: `wallet` with `nonce`, and `signer`'s EIP-191 signature over `message`. */
export async function signedBody(parts: {
  wallet: string;
  nonce: string;
  message: string;
  signer: PrivateKeyAccount;
}) {
  return {
    ...AGENT_FIELDS,
    wallet_address: parts.wallet,
    nonce: parts.nonce,
    signature: await parts.signer.signMessage({ message: parts.message }),
  };
}

/** Nonce, sign, register: the whole flow, returning the raw response. */
export async function register(
  app: App,
  account: PrivateKeyAccount = newAccount(),
  fields: Record<string, unknown> = {},
): Promise<LightMyRequestResponse> {
  const { nonce, message } = await getNonce(app, account.address);
  const body = await signedBody({ wallet: account.address, nonce, message, signer: account });
  return postRegister(app, { ...body, ...fields });
}

/** Registers a new agent and returns its API key; fails the test if registration fails. */
export async function registeredAgent(app: App, fields: Record<string, unknown> = {}) {
  const account = newAccount();
  const response = await register(app, account, fields);
  if (response.statusCode !== 200) throw new Error(`register failed: ${response.body}`);
  const body: RegisterResponse = response.json();
  return { account, apiKey: body.api_key, body };
}

/** A write sent with `Idempotency-Key: key`, as an agent (its API key) or as the admin. */
export function keyedWrite(
  app: App,
  key: string,
  url: string,
  payload: object | undefined,
  auth: { apiKey?: string; admin?: boolean },
  method: 'POST' | 'DELETE' = 'POST',
): Promise<LightMyRequestResponse> {
  return app.inject({
    method,
    url,
    headers: {
      'idempotency-key': key,
      ...(auth.apiKey && { 'x-api-key': auth.apiKey }),
      ...(auth.admin && { 'x-admin-token': ADMIN_TOKEN }),
    },
    ...(payload && { payload }),
  });
}

export function admin(app: App, method: 'GET' | 'POST', url: string, payload?: object) {
  return app.inject({
    method,
    url,
    headers: { 'x-admin-token': ADMIN_TOKEN },
    ...(payload ? { payload } : {}),
  });
}

/**
 * A sandbox with one registered agent raised to `established`, so that every route, the vote
 * included, reads its body rather than refusing the tier.
 */
export async function sandboxWithEstablishedAgent(): Promise<{
  sandbox: TestSandbox;
  apiKey: string;
}> {
  const sandbox = await createTestSandbox();
  const agent = await registeredAgent(sandbox.app);
  // A refused change would leave the agent unverified, and every test that uses it would
  // then be reading the 403 path rather than the route's body.
  const raised = await admin(sandbox.app, 'POST', '/sandbox/agents/tier', {
    wallet_address: agent.account.address,
    tier: 'established',
  });
  if (raised.statusCode !== 200 || raised.json().tier !== 'established') {
    await sandbox.close();
    throw new Error(`raising the agent to established failed: ${raised.statusCode} ${raised.body}`);
  }
  return { sandbox, apiKey: agent.apiKey };
}

/**
 * Everything a sandbox has written to its store, as text to search for a secret: on SQLite the
 * bytes of sandbox.db and its write-ahead log; on PostgreSQL every value of every row of every
 * table in the database (binary values as their bytes).
 */
export async function storedText(sandbox: TestSandbox): Promise<string> {
  if (!sandbox.database) {
    return ['sandbox.db', 'sandbox.db-wal']
      .map((name) => {
        try {
          return readFileSync(join(sandbox.dir, name)).toString('latin1');
        } catch {
          return '';
        }
      })
      .join('');
  }
  const client = new pg.Client({ connectionString: sandbox.database });
  await client.connect();
  try {
    const tables = await client.query<{ schema: string; name: string }>(
      `SELECT table_schema AS schema, table_name AS name FROM information_schema.tables
        WHERE table_type = 'BASE TABLE' AND table_schema NOT IN ('pg_catalog', 'information_schema')`,
    );
    expect(tables.rows.map((table) => table.name)).toContain('agents');
    const text: string[] = [];
    for (const { schema, name } of tables.rows) {
      const table = `${client.escapeIdentifier(schema)}.${client.escapeIdentifier(name)}`;
      for (const row of (await client.query(`SELECT * FROM ${table}`)).rows) {
        for (const value of Object.values(row)) {
          text.push(Buffer.isBuffer(value) ? value.toString('latin1') : JSON.stringify(value));
        }
      }
    }
    return text.join('\n');
  } finally {
    await client.end();
  }
}
