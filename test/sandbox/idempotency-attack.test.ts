import { randomUUID } from 'node:crypto';
import type { LightMyRequestResponse } from 'fastify';
import { describe, expect, it } from 'vitest';
import { chainAgent, useChainSandbox } from '../helpers/chain.ts';
import { ADMIN_TOKEN, type TestSandbox } from '../helpers/sandbox.ts';

/**
 * An outside review of Idempotency-Key (issue 24): each test is a way found to break the
 * contract of docs/idempotency.md on a real sandbox (app, SQLite, anvil).
 */
let sandbox: TestSandbox;
useChainSandbox((started) => {
  sandbox = started;
});

function keyed(
  on: TestSandbox,
  key: string,
  url: string,
  payload: object | undefined,
  auth: { apiKey?: string; admin?: boolean },
  method: 'POST' | 'DELETE' = 'POST',
): Promise<LightMyRequestResponse> {
  return on.app.inject({
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

describe('the body a key is bound to', () => {
  it('is the body as the route reads it: a route that reads none (the faucet) replays whatever body is sent', async () => {
    // docs/idempotency.md: "the body as the route reads it ... fields the route does not know
    // dropped". The faucet reads no body, so `{}` and `{"note": 1}` are the same request.
    const agent = await chainAgent(sandbox);
    const key = randomUUID();
    const url = '/api/v1/agent/faucet';
    const first = await keyed(sandbox, key, url, {}, { apiKey: agent.apiKey });
    expect(first.statusCode, first.body).toBe(200);
    const again = await keyed(sandbox, key, url, { note: 1 }, { apiKey: agent.apiKey });
    expect(again.statusCode, again.body).toBe(200);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.body).toBe(first.body);
  });
});

describe('a repeat while the first request still runs', () => {
  it('gets 409 with Retry-After until the first is answered, not an answer not yet sent (maybe not yet on disk)', async () => {
    const agent = await chainAgent(sandbox);
    const key = randomUUID();
    const body = { vault_id: 'moderate', amount_usdc: 1 };
    const url = '/api/v1/agent/vault/deposit';
    // The first deposit is held after its commit, before its answer: it waits for the index,
    // which waits here until the repeat has been answered.
    const indexer = sandbox.runtime.parts.indexer();
    const syncForWrite = indexer.syncForWrite.bind(indexer);
    let release!: () => void;
    const released = new Promise<void>((resolve) => {
      release = resolve;
    });
    let committed!: () => void;
    const held = new Promise<void>((resolve) => {
      committed = resolve;
    });
    indexer.syncForWrite = async (block) => {
      committed();
      await released;
      return syncForWrite(block);
    };
    try {
      const first = keyed(sandbox, key, url, body, { apiKey: agent.apiKey });
      await held;
      const repeat = await keyed(sandbox, key, url, body, { apiKey: agent.apiKey });
      release();
      expect((await first).statusCode).toBe(200);
      expect(repeat.statusCode, repeat.body).toBe(409);
      expect(repeat.headers['retry-after']).toBe('1');
    } finally {
      indexer.syncForWrite = syncForWrite;
      release();
    }
    const after = await keyed(sandbox, key, url, body, { apiKey: agent.apiKey });
    expect(after.headers['idempotent-replayed']).toBe('true');
  });
});

describe('keys of writes whose effects are files (snapshots)', () => {
  // NOT FIXED (review finding): a snapshot's (or a snapshot delete's) key is a row of
  // sandbox.db, which a restore replaces, while its effect is a file, which a restore keeps.
  // The key is then gone but not its write: sent again, it is run again (409 here; with
  // "replace": true it silently takes the snapshot again, of another state). `it.fails`
  // until it is fixed; then make it a plain `it`.
  it.fails('survive a restore: a snapshot taken with a key and then sent again after a restore is replayed, not taken again', async () => {
    const admin = { admin: true };
    const base = `base-${randomUUID().slice(0, 8)}`;
    expect(
      (await keyed(sandbox, randomUUID(), '/sandbox/snapshots', { name: base }, admin)).statusCode,
    ).toBe(200);
    const name = `later-${randomUUID().slice(0, 8)}`;
    const key = randomUUID();
    const taken = await keyed(sandbox, key, '/sandbox/snapshots', { name }, admin);
    expect(taken.statusCode, taken.body).toBe(200);
    const restored = await keyed(
      sandbox,
      randomUUID(),
      `/sandbox/snapshots/${base}/restore`,
      undefined,
      admin,
    );
    expect(restored.statusCode, restored.body).toBe(200);
    // The snapshot file is still there (files are not restored): the write took effect, and
    // its key must still answer for it.
    const again = await keyed(sandbox, key, '/sandbox/snapshots', { name }, admin);
    expect(again.statusCode, again.body).toBe(200);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.body).toBe(taken.body);
  });
});
