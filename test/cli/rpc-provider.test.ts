import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { startAnvil } from '../../src/sandbox/chain/anvil.ts';
import { type RpcProxy, startRpcProxy } from '../helpers/rpc-proxy.ts';
import { registerOver, rpcCall, until, useServes } from '../helpers/serve.ts';

const serves = useServes('rpc-provider', 'rpc-provider-admin');
const { serve, stop, request } = serves;

/** The most blocks the proxy's eth_getLogs takes, as a hosted provider caps it. */
const MAX_LOG_BLOCKS = 8;
/**
 * A receipt is not found the first this many times it is asked for, as a node answers before it
 * has indexed the block it just mined: more than viem's waitForTransactionReceipt asks before it
 * waits for a next block, which a chain that mines only on transactions never makes.
 */
const LATE_RECEIPTS = 3;
/** Blocks this deep are final behind --rpc-url on a chain that is not a dev chain (docs/data-api.md). */
const FINALITY_DEPTH = 12;

// biome-ignore lint/suspicious/noExplicitAny: checked field by field
const getJson = async (url: string): Promise<any> => (await fetch(url)).json();

describe('--rpc-url on a chain that is not a dev chain', () => {
  // One sandbox through the whole provider path (deploy, index across refused ranges, an
  // outage, a deep reorganisation): each part starts from the state the one before left.
  it('indexes across ranges the provider refuses, reads at full range again after an outage, and rebuilds after a reorganisation deeper than the finality depth; a write whose receipt the node finds late is answered', async () => {
    const node = await startAnvil({ stateDir: serves.dir() });
    let proxy: RpcProxy | undefined;
    const mine = (blocks: number) =>
      rpcCall(node.rpcUrl, 'anvil_mine', [`0x${blocks.toString(16)}`]);
    const head = async () => Number(await rpcCall(node.rpcUrl, 'eth_blockNumber'));
    try {
      const state = join(serves.dir(), 'state');
      // The contracts are deployed by a sandbox on the node while it is still a dev chain; then
      // the node is reached only through the proxy, with a new index.
      await stop(await serve(['--state', state, '--rpc-url', node.rpcUrl]));
      for (const suffix of ['', '-wal', '-shm']) {
        rmSync(join(state, `index.db${suffix}`), { force: true });
      }
      proxy = await startRpcProxy(node.rpcUrl, {
        maxLogBlocks: MAX_LOG_BLOCKS,
        lateReceipts: LATE_RECEIPTS,
      });
      const provider = proxy;
      const sandbox = await serve([
        '--state',
        state,
        '--rpc-url',
        provider.url,
        '--deployment',
        join(state, 'deployment.json'),
      ]);
      const { apiKey } = await registerOver(sandbox.url);
      // A chain the sandbox does not own cannot be rewound: no snapshots, said so.
      const snapshot = await request(sandbox.url, 'POST', '/sandbox/snapshots', { name: 'x' });
      expect(snapshot.status).toBe(400);
      expect(snapshot.body.error).toMatch(/--rpc-url.*cannot rewind/);
      const wallet = (await request(sandbox.url, 'GET', '/api/v1/agent/wallet', undefined, apiKey))
        .body.agent_address as string;
      const history = `${sandbox.url}/v1/users/${wallet}/transactions`;
      const deposit = async (vault_id: string, amount_usdc: number) => {
        const answer = await request(
          sandbox.url,
          'POST',
          '/api/v1/agent/vault/deposit',
          { vault_id, amount_usdc },
          apiKey,
        );
        expect(answer.status).toBe(200);
        return answer.body.deposit_tx as string;
      };

      // Deposits with more blocks between them than one eth_getLogs call may cover.
      const made = [await deposit('moderate', 5)];
      await mine(3 * MAX_LOG_BLOCKS);
      made.push(await deposit('aggressive', 3));
      await mine(3 * MAX_LOG_BLOCKS);
      made.push(await deposit('moderate', 2));
      const indexed = await getJson(history);
      expect(indexed.total).toBe(3);
      expect(
        indexed.transactions.map((tx: { hash: string; amount: string }) => [tx.hash, tx.amount]),
      ).toEqual(
        expect.arrayContaining([
          [made[0], '5000000'],
          [made[1], '3000000'],
          [made[2], '2000000'],
        ]),
      );
      // The provider refused wider ranges, and the index asked again within its limit.
      expect(provider.logsCalls.some((call) => !call.served)).toBe(true);
      const served = provider.logsCalls.filter((call) => call.served);
      expect(served.every((call) => call.to - call.from + 1 <= MAX_LOG_BLOCKS)).toBe(true);

      // An outage (503s and closed connections) that begins as the index reads logs. The
      // blocks are mined while the proxy holds the head, so that the index sees them at once
      // and reads them in one step, wider than the provider takes.
      const before = await head();
      const release = provider.holdHead(before);
      const outageOver = provider.outage(5);
      await mine(4 * MAX_LOG_BLOCKS + FINALITY_DEPTH);
      release();
      await outageOver;
      const afterOutage = provider.logsCalls.length;
      const caughtUpTo = before + 4 * MAX_LOG_BLOCKS;
      await until(() => provider.logsCalls.some((call) => call.served && call.to >= caughtUpTo));
      expect(sandbox.stderr()).toMatch(/indexing failed: cannot reach/);
      // Once it is over, logs are read in calls as wide as the provider takes, not a block at a time.
      const spans = provider.logsCalls
        .slice(afterOutage)
        .filter((call) => call.served)
        .map((call) => call.to - call.from + 1);
      expect(Math.max(...spans)).toBe(MAX_LOG_BLOCKS);
      made.push(await deposit('hedged', 1));
      expect((await getJson(history)).total).toBe(4);

      // Reorganisations: the blocks after the head are replaced by others once the index holds
      // `depth` of them. The common ancestor is looked for no deeper than the finality depth:
      // at exactly that depth it is found and the index goes back to it; one block deeper is
      // reported, and index.db is rebuilt from the chain.
      const indexedBlock = async () =>
        (await request(sandbox.url, 'GET', '/sandbox/info')).body.index.block_number as number;
      const reorganise = async (depth: number, before?: () => Promise<unknown>) => {
        const snapshot = await rpcCall(node.rpcUrl, 'evm_snapshot');
        const ancestor = await head();
        await before?.();
        await mine(ancestor + depth + FINALITY_DEPTH - (await head()));
        await until(async () => (await indexedBlock()) === ancestor + depth);
        expect(await rpcCall(node.rpcUrl, 'evm_revert', [snapshot])).toBe(true);
        // Blocks at the same heights that differ (an hour later), and more.
        const tip = (await rpcCall(node.rpcUrl, 'eth_getBlockByNumber', ['latest', false])) as {
          timestamp: string;
        };
        await rpcCall(node.rpcUrl, 'evm_mine', [{ timestamp: Number(tip.timestamp) + 3600 }]);
        await mine(3 * FINALITY_DEPTH);
        return ancestor;
      };

      const ancestor = await reorganise(FINALITY_DEPTH, async () => {
        // A deposit the reorganisation takes away. (Its agent's wallet keeps the nonce after
        // it, so the agent writes no more.)
        await deposit('conservative', 1);
        expect((await getJson(history)).total).toBe(5);
      });
      await until(async () => (await getJson(history)).total === 4);
      expect(sandbox.stderr()).toContain(`the index goes back to block ${ancestor} `);
      expect(sandbox.stderr()).not.toContain('deeper than the finality depth');

      const deepAncestor = await reorganise(FINALITY_DEPTH + 1);
      await until(() => sandbox.stderr().includes('index.db was rebuilt from the chain'));
      expect(sandbox.stderr()).toContain(
        `the chain reorganised deeper than the finality depth (${FINALITY_DEPTH} blocks): it no longer holds indexed block ${deepAncestor + 1}`,
      );
      const kept = (await getJson(history)).transactions.map((tx: { hash: string }) => tx.hash);
      expect(kept.sort()).toEqual([...made].sort());
      await stop(sandbox);
    } finally {
      await proxy?.close();
      await node.stop();
    }
  });
});
