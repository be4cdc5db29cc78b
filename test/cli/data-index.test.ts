import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { startAnvil } from '../../src/sandbox/chain/anvil.ts';
import { registerOver, useServes } from '../helpers/serve.ts';

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

describe('a reorganised chain', () => {
  it('is followed: the index goes back to the common ancestor and indexes the new blocks', async () => {
    const node = await startAnvil({ stateDir: serves.dir() });
    const rpc = async (method: string, params: unknown[] = []) => {
      const response = await fetch(node.rpcUrl, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
      });
      return ((await response.json()) as { result: unknown }).result;
    };
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
      expect((await getJson(history)).total).toBe(1);

      // The deposit's blocks are replaced by others at the same heights, and more.
      expect(await rpc('evm_revert', [snapshot])).toBe(true);
      for (let i = 0; i < 4; i++) await rpc('evm_mine');
      let total = 1;
      for (let i = 0; i < 50 && total !== 0; i++) {
        await new Promise((resolve) => setTimeout(resolve, 100));
        total = (await getJson(history)).total;
      }
      expect(total).toBe(0);
      expect(sandbox.stderr()).toContain('the chain reorganised');
      const positions = await getJson(`${sandbox.url}/v1/users/${wallet}/positions`);
      expect(positions.positions).toEqual([]);
    } finally {
      await node.stop();
    }
  });
});
