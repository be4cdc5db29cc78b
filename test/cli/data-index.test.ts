import { mkdirSync, readFileSync, rmdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { describe, expect, it } from 'vitest';
import { startAnvil } from '../../src/sandbox/chain/anvil.ts';
import { damageRootPages } from '../helpers/index-damage.ts';
import { registerOver, rpcCall, until, useServes } from '../helpers/serve.ts';

const serves = useServes('data-index', 'data-index-admin');
const { serve, stop, request } = serves;

/** A GET's JSON body; tests check it field by field. */
async function getJson(url: string) {
  // biome-ignore lint/suspicious/noExplicitAny: checked field by field
  return (await (await fetch(url)).json()) as any;
}

/** A registered agent that has deposited into two vaults; returns its server-side wallet. */
async function agentWithDeposits(url: string, deposits: Array<[string, number]>) {
  const { apiKey } = await registerOver(url);
  for (const [vault_id, amount_usdc] of deposits) {
    const deposit = await request(
      url,
      'POST',
      '/api/v1/agent/vault/deposit',
      { vault_id, amount_usdc },
      apiKey,
    );
    expect(deposit.status).toBe(200);
  }
  const wallet = await request(url, 'GET', '/api/v1/agent/wallet', undefined, apiKey);
  return wallet.body.agent_address as string;
}

/** Every body derived from the index (nodes are measured live, so they are left out). */
async function bodies(url: string, wallet: string) {
  const vaults = (await getJson(`${url}/v1/vaults`)).vaults as Array<{ address: string }>;
  const moderate = vaults[1]?.address;
  const paths = [
    `/v1/users/${wallet}/transactions`,
    `/v1/users/${wallet}/positions`,
    '/v1/vaults',
    `/v1/vaults/${moderate}`,
    `/v1/vaults/${moderate}/history?period=all&interval=4h`,
    '/v1/strategies',
    '/v1/protocol/stats',
  ];
  return Promise.all(
    paths.map(async (path) => {
      const response = await fetch(`${url}${path}`);
      expect(response.status).toBe(200);
      return response.text();
    }),
  );
}

describe('index.db', () => {
  it('is rebuilt from the chain when deleted or damaged, and the API answers the same bodies', async () => {
    const state = join(serves.dir(), 'state');
    const first = await serve(['--state', state]);
    const wallet = await agentWithDeposits(first.url, [
      ['moderate', 12.5],
      ['aggressive', 3],
    ]);
    const before = await bodies(first.url, wallet);
    expect(JSON.parse(before[0] as string).total).toBe(2);
    await stop(first);

    for (const suffix of ['', '-wal', '-shm'])
      rmSync(join(state, `index.db${suffix}`), { force: true });
    const rebuilt = await serve(['--state', state]);
    expect(await bodies(rebuilt.url, wallet)).toEqual(before);
    await stop(rebuilt);

    // Not a database at all: derived data is rebuilt, never a reason to refuse to start.
    for (const suffix of ['-wal', '-shm'])
      rmSync(join(state, `index.db${suffix}`), { force: true });
    writeFileSync(join(state, 'index.db'), 'not a database'.repeat(500));
    const repaired = await serve(['--state', state]);
    expect(await bodies(repaired.url, wallet)).toEqual(before);
  });
});

const transactionsOf = (url: string, wallet: string) =>
  fetch(`${url}/v1/users/${wallet}/transactions`);

describe('a damaged index.db', () => {
  it('answers 503 INDEX_UNAVAILABLE while running, never a stale or empty list, says so in /health, and is rebuilt', async () => {
    const state = join(serves.dir(), 'state');
    const sandbox = await serve(['--state', state]);
    const { apiKey } = await registerOver(sandbox.url);
    const wallet = (await request(sandbox.url, 'GET', '/api/v1/agent/wallet', undefined, apiKey))
      .body.agent_address as string;
    const deposit = (amount_usdc: number) =>
      request(
        sandbox.url,
        'POST',
        '/api/v1/agent/vault/deposit',
        { vault_id: 'moderate', amount_usdc },
        apiKey,
      );
    expect((await deposit(5)).status).toBe(200);
    expect((await getJson(`${sandbox.url}/v1/users/${wallet}/transactions`)).total).toBe(1);

    const index = join(state, 'index.db');
    damageRootPages(index, ['transactions', 'positions']);
    // The rebuild starts by deleting index.db and its companions: a directory where its
    // write-ahead log was holds the rebuild back, so that the failed state can be looked at.
    rmSync(`${index}-wal`, { force: true });
    mkdirSync(`${index}-wal`);

    // The first read of a damaged table finds the damage: 503, not 500 or an empty list.
    const stats = await fetch(`${sandbox.url}/v1/protocol/stats`);
    expect(stats.status).toBe(503);
    expect(stats.headers.get('retry-after')).toBe('1');
    expect(((await stats.json()) as { error: { code: string } }).error.code).toBe(
      'INDEX_UNAVAILABLE',
    );
    // A write is still answered (it is on the chain), and not shown as if it were not.
    expect((await deposit(2)).status).toBe(200);
    for (const path of [
      `/v1/users/${wallet}/transactions`,
      `/v1/users/${wallet}/positions`,
      '/v1/vaults',
    ]) {
      const answer = await fetch(`${sandbox.url}${path}`);
      expect(answer.status).toBe(503);
      expect(((await answer.json()) as { error: { code: string } }).error.code).toBe(
        'INDEX_UNAVAILABLE',
      );
    }
    const graphql = await fetch(`${sandbox.url}/graphql`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ query: `{ userPositions(address: "${wallet}") { shares } }` }),
    });
    expect(graphql.status).toBe(503);
    const graphqlBody = (await graphql.json()) as {
      errors: Array<{ extensions: { code: string } }>;
    };
    expect(graphqlBody.errors[0]?.extensions.code).toBe('INDEX_UNAVAILABLE');
    const health = await getJson(`${sandbox.url}/health`);
    expect(health.status).toBe('degraded');
    expect(health.rpc_connected).toBe(true);
    expect(health.reason).toMatch(/^index\.db failed \(database disk image is malformed\)/);

    // Once the rebuild may delete the file, it does, indexes the chain again, and the writes
    // made meanwhile are there.
    rmdirSync(`${index}-wal`);
    let answer = await transactionsOf(sandbox.url, wallet);
    while (answer.status === 503) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      answer = await transactionsOf(sandbox.url, wallet);
    }
    expect(answer.status).toBe(200);
    expect(((await answer.json()) as { total: number }).total).toBe(2);
    expect((await getJson(`${sandbox.url}/health`)).status).toBe('ok');
    expect((await fetch(`${sandbox.url}/v1/protocol/stats`)).status).toBe(200);
    expect(sandbox.stderr()).toContain('index.db was rebuilt from the chain');
  });

  it('holds registrations back with 503 while it cannot tell whether a wallet has history', async () => {
    const state = join(serves.dir(), 'state');
    const sandbox = await serve(['--state', state]);
    const { apiKey } = await registerOver(sandbox.url);
    const deposit = await request(
      sandbox.url,
      'POST',
      '/api/v1/agent/vault/deposit',
      { vault_id: 'moderate', amount_usdc: 5 },
      apiKey,
    );
    expect(deposit.status).toBe(200);
    const index = join(state, 'index.db');
    damageRootPages(index, ['transactions', 'positions']);
    // The rebuild cannot delete index.db's companions while a directory stands for its log.
    rmSync(`${index}-wal`, { force: true });
    mkdirSync(`${index}-wal`);
    expect((await fetch(`${sandbox.url}/v1/protocol/stats`)).status).toBe(503);

    await expect(registerOver(sandbox.url)).rejects.toThrow(
      /register answered 503: .*index is being rebuilt.*try again shortly/,
    );
    rmdirSync(`${index}-wal`);
    while ((await fetch(`${sandbox.url}/v1/protocol/stats`)).status === 503) {
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    expect((await registerOver(sandbox.url)).apiKey).toBeTruthy();
  });

  it('is rebuilt at start rather than refused, when its root pages are damaged', async () => {
    const state = join(serves.dir(), 'state');
    const first = await serve(['--state', state]);
    const wallet = await agentWithDeposits(first.url, [['moderate', 7]]);
    const before = await bodies(first.url, wallet);
    await stop(first);

    const index = join(state, 'index.db');
    damageRootPages(index, ['transactions', 'positions']);
    const second = await serve(['--state', state]);
    expect(await bodies(second.url, wallet)).toEqual(before);
    expect(second.stderr()).toContain(`${index} is damaged (PRAGMA quick_check:`);
  });
});

describe('a reorganised chain', () => {
  it('is followed: the index goes back to the common ancestor and indexes the new blocks', async () => {
    const node = await startAnvil({ stateDir: serves.dir() });
    const rpc = (method: string, params: unknown[] = []) => rpcCall(node.rpcUrl, method, params);
    try {
      const sandbox = await serve(['--rpc-url', node.rpcUrl]);
      const { apiKey } = await registerOver(sandbox.url);
      const wallet = (await request(sandbox.url, 'GET', '/api/v1/agent/wallet', undefined, apiKey))
        .body.agent_address as string;
      const snapshot = await rpc('evm_snapshot');
      const deposit = await request(
        sandbox.url,
        'POST',
        '/api/v1/agent/vault/deposit',
        { vault_id: 'hedged', amount_usdc: 5 },
        apiKey,
      );
      expect(deposit.status).toBe(200);
      const history = `${sandbox.url}/v1/users/${wallet}/transactions`;
      const before = await getJson(history);
      expect(before.total).toBe(1);
      const oldBlock = before.transactions[0].blockNumber as number;
      const sent = [deposit.body.approve_tx, deposit.body.deposit_tx].filter(Boolean) as string[];
      const raws = await Promise.all(
        sent.map((hash) => rpc('eth_getRawTransactionByHash', [hash])),
      );

      // The deposit's blocks are replaced by others at the same heights (empty), and after
      // them the same deposit again, two blocks higher than it was: the new blocks hold it.
      expect(await rpc('evm_revert', [snapshot])).toBe(true);
      for (let i = 0; i < 2; i++) await rpc('evm_mine');
      for (const raw of raws) await rpc('eth_sendRawTransaction', [raw]);
      // anvil may answer the send before it has indexed the block it mined for it.
      let newBlock = 0;
      await until(async () => {
        const receipt = (await rpc('eth_getTransactionReceipt', [deposit.body.deposit_tx])) as {
          blockNumber: string;
        } | null;
        if (receipt) newBlock = Number(receipt.blockNumber);
        return receipt !== null;
      });
      expect(newBlock).toBeGreaterThan(oldBlock);
      await rpc('evm_mine');
      await until(
        async () => (await getJson(history)).transactions[0]?.blockNumber === newBlock,
        10_000,
      );
      const after = await getJson(history);
      expect(after.total).toBe(1);
      expect(after.transactions[0]).toEqual({
        ...before.transactions[0],
        blockNumber: newBlock,
        timestamp: expect.any(String),
      });
      // Seen as the next block's parent (a step) or as a head no longer the indexed block (the
      // poll's look at the head, when it comes between the revert and the new blocks).
      expect(sandbox.stderr()).toMatch(
        /the chain reorganised below block \d+|the chain no longer holds indexed block \d+/,
      );
      const positions = await getJson(`${sandbox.url}/v1/users/${wallet}/positions`);
      expect(positions.positions).toEqual([
        expect.objectContaining({ shares: before.transactions[0].shares }),
      ]);
    } finally {
      await node.stop();
    }
  });
});

describe('--rpc-url', () => {
  it('indexes from the deployment’s block, found on the chain when the deployment file does not say', async () => {
    const node = await startAnvil({ stateDir: serves.dir() });
    try {
      // Blocks before the deployment, which the index has no reason to read.
      for (let i = 0; i < 5; i++) await rpcCall(node.rpcUrl, 'evm_mine');
      const state = join(serves.dir(), 'state');
      const first = await serve(['--state', state, '--rpc-url', node.rpcUrl]);
      const deployment = JSON.parse(readFileSync(join(state, 'deployment.json'), 'utf8'));
      expect(deployment.deployed_block).toBeGreaterThan(5);
      const firstDeployed = deployment.deployed_block as number;
      const wallet = await agentWithDeposits(first.url, [['conservative', 4]]);
      const before = await bodies(first.url, wallet);
      await stop(first);

      // An older deployment file, without deployed_block, and no index.
      delete deployment.deployed_block;
      writeFileSync(join(state, 'deployment.json'), JSON.stringify(deployment));
      for (const suffix of ['', '-wal', '-shm'])
        rmSync(join(state, `index.db${suffix}`), { force: true });
      const second = await serve(['--state', state, '--rpc-url', node.rpcUrl]);
      // A dev chain behind --rpc-url gains a block at each start (the clock is synced), so
      // only the answers that do not depend on the latest block are compared.
      const after = await bodies(second.url, wallet);
      expect(after.slice(0, 3)).toEqual(before.slice(0, 3));
      expect(JSON.parse(after[6] as string).transactions).toBe(1);
      await stop(second);
      // The rebuilt index began at the deployment's block, found by its code, not at block 1.
      const index = new DatabaseSync(join(state, 'index.db'), { readOnly: true });
      const { first: firstIndexed } = index
        .prepare('SELECT MIN(number) AS first FROM blocks')
        .get() as {
        first: number;
      };
      index.close();
      expect(Number(firstIndexed)).toBe(firstDeployed);
    } finally {
      await node.stop();
    }
  });
});
