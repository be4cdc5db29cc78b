import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Address, createPublicClient, erc20Abi, http } from 'viem';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../src/sandbox/app.ts';
import { type AnvilProcess, startAnvil } from '../../src/sandbox/chain/anvil.ts';
import { hashAdminToken } from '../../src/sandbox/plugins/auth.ts';
import { type ChainReader, chainAgent, useChainSandbox } from '../helpers/chain.ts';
import { createTestSandbox, keyedWrite, type TestSandbox } from '../helpers/sandbox.ts';

/**
 * An outside review of Idempotency-Key (issue 24): each test is a way found to break the
 * contract of docs/idempotency.md on a real sandbox (app, SQLite, anvil).
 */
let sandbox: TestSandbox;
useChainSandbox((started) => {
  sandbox = started;
});

const keyed = (
  on: TestSandbox,
  key: string,
  url: string,
  payload: object | undefined,
  auth: { apiKey?: string; admin?: boolean },
  method: 'POST' | 'DELETE' = 'POST',
) => keyedWrite(on.app, key, url, payload, auth, method);

const usdcOf = (on: TestSandbox, client: ChainReader, address: Address) =>
  client.readContract({
    address: on.chain.deployment.usdc,
    abi: erc20Abi,
    functionName: 'balanceOf',
    args: [address],
  });

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

describe("the admin's keys", () => {
  it("are the admin token's: after serve restarts with another --admin-token, its holder does not get the answers (a node key) kept for the old one", async () => {
    const body = {
      name: `node-${randomUUID().slice(0, 8)}`,
      operator_address: '0x000000000000000000000000000000000000dEaD',
    };
    const key = 'ci-setup-node';
    const first = await keyed(sandbox, key, '/sandbox/nodes', body, { admin: true });
    expect(first.statusCode, first.body).toBe(200);
    // The same sandbox state served again under another admin token, as `serve --admin-token`
    // does on a restart of the same state directory.
    const other = 'another-admin-token';
    const app = await buildApp({
      store: sandbox.store,
      clock: sandbox.clock,
      chain: sandbox.chain,
      index: sandbox.runtime.index,
      onboarder: sandbox.runtime.onboarder,
      adminTokenHash: hashAdminToken(other),
      snapshots: undefined,
      stateDir: sandbox.dir,
      persistent: false,
      rateLimit: false,
      trustProxy: false,
      logger: false,
      connections: { maxConnections: 64, requestTimeoutMs: 30_000 },
    });
    try {
      const again = await app.inject({
        method: 'POST',
        url: '/sandbox/nodes',
        headers: { 'idempotency-key': key, 'x-admin-token': other },
        payload: body,
      });
      expect(again.statusCode, again.body).toBe(200);
      expect(again.headers['idempotent-replayed']).toBe('false');
      expect(again.json().node_key).not.toBe(first.json().node_key);
    } finally {
      await app.close();
    }
  });
});

describe('openapi.json', () => {
  it("lists Idempotent-Replayed on a keyed write's 409, which a handler's final 409 (a second vote) carries", async () => {
    const agent = await chainAgent(sandbox, 'established');
    const proposal = await keyed(
      sandbox,
      randomUUID(),
      '/sandbox/proposals',
      { title: 'Twice', description: 'one vote each' },
      { admin: true },
    );
    const vote = { proposal_id: proposal.json().proposal_id, support: 1 };
    const url = '/api/v1/agent/governance/vote';
    expect(
      (await keyed(sandbox, randomUUID(), url, vote, { apiKey: agent.apiKey })).statusCode,
    ).toBe(200);
    const second = await keyed(sandbox, randomUUID(), url, vote, { apiKey: agent.apiKey });
    expect(second.statusCode).toBe(409);
    expect(second.headers['idempotent-replayed']).toBe('false');
    // A client tells this final 409 from a key still running by that header: the document
    // must say the 409 may carry it.
    const document = (await sandbox.app.inject({ url: '/openapi.json' })).json();
    const conflict = document.paths[url].post.responses['409'];
    expect(conflict.headers['Idempotent-Replayed']).toBeDefined();
    expect(conflict.headers['Retry-After']).toBeDefined();
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
  // A snapshot's (or a snapshot delete's) key is a row of sandbox.db, which a restore
  // replaces, while its effect is a file, which a restore keeps: such keys are kept through
  // restores (outlives_restore), or a retry would run the write again (409; with
  // "replace": true it would take the snapshot again, of another state).
  it('survive a restore: a snapshot taken with a key and then sent again after a restore is replayed, not taken again', async () => {
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

    // So does the restore's own key, through a later restore: a retried restore is answered,
    // not done again over what came after it.
    const restoreKey = randomUUID();
    const url = `/sandbox/snapshots/${name}/restore`;
    const first = await keyed(sandbox, restoreKey, url, undefined, admin);
    expect(first.statusCode, first.body).toBe(200);
    const back = await keyed(
      sandbox,
      randomUUID(),
      `/sandbox/snapshots/${base}/restore`,
      undefined,
      admin,
    );
    expect(back.statusCode, back.body).toBe(200);
    const retried = await keyed(sandbox, restoreKey, url, undefined, admin);
    expect(retried.headers['idempotent-replayed']).toBe('true');
    expect(retried.body).toBe(first.body);
  });
});

/**
 * A JSON-RPC proxy in front of a plain anvil (a block per transaction), as a hosted provider
 * that fails a request now and then, while the node goes on as usual: receipt reads answered
 * with a JSON-RPC error or their connection closed, or a send's answer lost after the node
 * took the transaction.
 */
async function startFlakyProvider(target: string) {
  let failReceipts = 0;
  let dropReceipts = 0;
  let dropSends = 0;
  let passSends = 0;
  const server: Server = createServer(async (request, response) => {
    const chunks: Buffer[] = [];
    for await (const chunk of request) chunks.push(chunk as Buffer);
    const body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
    const calls: Array<{ id: unknown; method: string }> = Array.isArray(body) ? body : [body];
    if (dropReceipts > 0 && calls.some((call) => call.method === 'eth_getTransactionReceipt')) {
      dropReceipts--;
      request.socket.destroy();
      return;
    }
    const sending = calls.some((call) => call.method === 'eth_sendRawTransaction');
    if (sending && passSends > 0) passSends--;
    else if (sending && dropSends > 0) {
      // The node takes the transaction; its answer is lost on the way back.
      dropSends--;
      await fetch(target, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
      request.socket.destroy();
      return;
    }
    const failed = new Map<unknown, object>();
    for (const call of calls) {
      if (call.method === 'eth_getTransactionReceipt' && failReceipts > 0) {
        failReceipts--;
        failed.set(call.id, {
          jsonrpc: '2.0',
          id: call.id,
          error: { code: -32603, message: 'internal error: upstream timeout' },
        });
      }
    }
    const passed = calls.filter((call) => !failed.has(call.id));
    const answers: Array<{ id: unknown }> = [];
    if (passed.length > 0) {
      const forwarded = await fetch(target, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(Array.isArray(body) ? passed : passed[0]),
      });
      const json = await forwarded.json();
      answers.push(...(Array.isArray(json) ? json : [json]));
    }
    const ordered = calls.map(
      (call) => failed.get(call.id) ?? answers.find((answer) => answer.id === call.id),
    );
    response
      .writeHead(200, { 'content-type': 'application/json' })
      .end(JSON.stringify(Array.isArray(body) ? ordered : ordered[0]));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    failNextReceipts(count: number) {
      failReceipts = count;
    },
    /** The connections of the next `count` requests that ask for a receipt are closed unanswered. */
    dropNextReceipts(count: number) {
      dropReceipts = count;
    },
    /**
     * After `passed` sends answered as usual, the next `count` transactions sent reach the
     * node, and its answer is dropped.
     */
    dropSendAnswers(count: number, passed: number) {
      dropSends = count;
      passSends = passed;
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

describe('on --rpc-url, a write whose node fails one request (its send, or its receipt)', () => {
  let nodeDir: string;
  let node: AnvilProcess;
  let proxy: Awaited<ReturnType<typeof startFlakyProvider>>;
  let remote: TestSandbox;
  beforeAll(async () => {
    nodeDir = mkdtempSync(join(tmpdir(), 'agentctl-idem-node-'));
    node = await startAnvil({ stateDir: nodeDir, mining: 'auto' });
    proxy = await startFlakyProvider(node.rpcUrl);
    remote = await createTestSandbox({ rpcUrl: proxy.url });
  });
  afterAll(async () => {
    await remote?.close();
    await proxy?.close();
    await node?.stop();
    rmSync(nodeDir, { recursive: true, force: true });
  });

  const deposit = (apiKey: string, key: string) =>
    keyed(
      remote,
      key,
      '/api/v1/agent/vault/deposit',
      { vault_id: 'moderate', amount_usdc: 2 },
      { apiKey },
    );

  it('is not answered, and kept for its key, as failed onchain when it was mined and took effect (a JSON-RPC error)', async () => {
    const agent = await chainAgent(remote);
    const remoteReader = createPublicClient({ transport: http(node.rpcUrl) });
    const before = await usdcOf(remote, remoteReader, agent.agentAddress);
    const key = randomUUID();
    proxy.failNextReceipts(1);
    const first = await deposit(agent.apiKey, key);
    const again = await deposit(agent.apiKey, key);
    // The deposit took effect on the chain, once ...
    expect(before - (await usdcOf(remote, remoteReader, agent.agentAddress))).toBe(2_000_000n);
    // ... so its key must not say, now and on every retry, that it failed.
    expect(first.statusCode, first.body).toBe(200);
    expect(again.body).toBe(first.body);
  });

  // The node took the transaction, and its answer to eth_sendRawTransaction was lost.
  it('runs once when the answer to its send is lost, and the client retries with its key', async () => {
    const agent = await chainAgent(remote);
    const remoteReader = createPublicClient({ transport: http(node.rpcUrl) });
    const before = await usdcOf(remote, remoteReader, agent.agentAddress);
    const key = randomUUID();
    // The approve's answer comes back; the deposit's is lost.
    proxy.dropSendAnswers(1, 1);
    const first = await deposit(agent.apiKey, key);
    const retried = first.statusCode >= 500 ? await deposit(agent.apiKey, key) : first;
    expect(retried.statusCode, retried.body).toBe(200);
    expect(before - (await usdcOf(remote, remoteReader, agent.agentAddress))).toBe(2_000_000n);
  });

  it('runs once when the connection drops as its receipt is read, and the client retries with its key', async () => {
    const agent = await chainAgent(remote);
    const remoteReader = createPublicClient({ transport: http(node.rpcUrl) });
    const before = await usdcOf(remote, remoteReader, agent.agentAddress);
    const key = randomUUID();
    proxy.dropNextReceipts(1);
    const first = await deposit(agent.apiKey, key);
    // A 5xx is what a client retries with the same key (issue 24, the command line).
    const retried = first.statusCode >= 500 ? await deposit(agent.apiKey, key) : first;
    expect(retried.statusCode, retried.body).toBe(200);
    expect(before - (await usdcOf(remote, remoteReader, agent.agentAddress))).toBe(2_000_000n);
  });
});
