import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { NewAgent } from '../../src/sandbox/store/agents.ts';
import { FIRST_AGENT_WALLET_INDEX, type Store } from '../../src/sandbox/store/index.ts';
import type { LoggedBlock } from '../../src/sandbox/store/types.ts';
import { STORE_BACKENDS } from '../helpers/store-backends.ts';

/** An agent as registration inserts it; `n` makes its identity its own. */
function agent(n: number): NewAgent {
  const hex = n.toString(16).padStart(40, '0');
  return {
    agent_id: `agent-${n}`,
    wallet_address: `0x${hex.toUpperCase()}`,
    wallet_key: `0x${hex}`,
    agent_name: `Agent ${n}`,
    agent_type: 'trading',
    description: n % 2 === 0 ? null : `the agent ${n}`,
    operator_address: `0x${'ab'.repeat(20)}`,
    operator_email: null,
    operator_name: null,
    framework: 'eliza',
    repo_url: null,
    tier: 'registered',
    created_at: 1_700_000_000_000 + n,
    wallet_index: FIRST_AGENT_WALLET_INDEX + n,
    agent_address: `0x${(n + 0x1000).toString(16).padStart(40, '0')}`,
  };
}

function block(number: number, txs: `0x${string}`[] = []): LoggedBlock {
  return {
    number,
    hash: `0x${number.toString(16).padStart(64, 'a')}`,
    parentHash: `0x${(number - 1).toString(16).padStart(64, 'b')}`,
    timestamp: 1_700_000_000 + number,
    txs,
    txHashes: [],
  };
}

/**
 * Every repository of the store, on SQLite and on PostgreSQL: rows written and read back with
 * the same types (numbers as numbers, bytes as bytes), counts and sums, upserts.
 */
describe.each(STORE_BACKENDS.map((backend) => backend()))(
  'the repositories on $name',
  (backend) => {
    let store: Store;
    beforeAll(() => backend.start());
    afterAll(() => backend.stop());
    beforeEach(async () => {
      store = await backend.open();
    });
    afterEach(() => store.close());

    it('agents: inserts, finds by wallet, key and address, counts and ranks', async () => {
      expect(await store.agents.hasAny()).toBe(false);
      expect(await store.agents.hasAnyApiKey()).toBe(false);
      expect(await store.agents.totals()).toEqual({
        total_agents: 0,
        active_agents: 0,
        strategies_submitted: 0,
      });
      await store.transaction(async (tx) => {
        await tx.agents.insert(agent(1), { hash: 'key-hash-1', prefix: 'ak_1' });
        await tx.agents.insert(agent(2), { hash: 'key-hash-2', prefix: 'ak_2' });
      });
      expect(await store.agents.hasAny()).toBe(true);
      expect(await store.agents.hasAnyApiKey()).toBe(true);
      expect(await store.agents.count()).toBe(2);

      const found = await store.agents.findByWallet(agent(1).wallet_address);
      expect(found).toEqual({
        ...agent(1),
        status: 'active',
        strategies_submitted: 0,
        performance_score: 0,
        deposited_usdc_raw: 0,
        votes_cast: 0,
        api_key_prefix: 'ak_1',
      });
      expect(typeof found?.created_at).toBe('number');
      expect((await store.agents.findByKeyHash('key-hash-2'))?.agent_id).toBe('agent-2');
      expect(await store.agents.findByKeyHash('no-such-hash')).toBeUndefined();
      expect(await store.agents.findByAgentAddress(agent(2).agent_address)).toEqual({
        agent_id: 'agent-2',
        agent_name: 'Agent 2',
        wallet_index: FIRST_AGENT_WALLET_INDEX + 2,
      });
      expect(await store.agents.names()).toHaveLength(2);

      // 2 strategies, 150 USDC (the score adds raw units / 1e8), 1 vote: 20 + 1.5 + 5.
      await store.agents.recordActivity('agent-2', {
        strategies: 2,
        depositedUsdcRaw: 150_000_000n,
        votes: 1,
      });
      await store.agents.recordActivity('agent-1', { votes: 1 });
      expect(await store.agents.leaderboard(10)).toEqual([
        {
          agent_name: 'Agent 2',
          tier: 'registered',
          performance_score: 26.5,
          strategies_submitted: 2,
        },
        {
          agent_name: 'Agent 1',
          tier: 'registered',
          performance_score: 5,
          strategies_submitted: 0,
        },
      ]);
      expect(await store.agents.leaderboard(1)).toHaveLength(1);
      expect(await store.agents.totals()).toEqual({
        total_agents: 2,
        active_agents: 2,
        strategies_submitted: 2,
      });
      expect((await store.agents.findByWallet(agent(2).wallet_address))?.deposited_usdc_raw).toBe(
        150_000_000,
      );

      // By the registered wallet (any case) or the server-side one.
      expect(await store.agents.setTier(agent(1).wallet_address.toLowerCase(), 'established')).toBe(
        true,
      );
      expect(await store.agents.setTier(agent(2).agent_address.toUpperCase(), 'established')).toBe(
        true,
      );
      expect(await store.agents.setTier(`0x${'9'.repeat(40)}`, 'established')).toBe(false);
      expect((await store.agents.findByWallet(agent(2).wallet_address))?.tier).toBe('established');
    });

    it('agents: rounds the score to the cent as SQLite does, half cents included', async () => {
      // Raw USDC (6 decimals) over 1e8: 0.015 is 0.01499… as a double, 0.125 is exact.
      const deposits = [1_500_000n, 267_500_000n, 12_500_000n, 100_500_000n, 500_000n];
      await store.transaction(async (tx) => {
        for (const [i, raw] of deposits.entries()) {
          await tx.agents.insert(agent(i), { hash: `h${i}`, prefix: `p${i}` });
          await tx.agents.recordActivity(`agent-${i}`, { depositedUsdcRaw: raw });
        }
      });
      const scores = await store.agents.leaderboard(10);
      expect(
        Object.fromEntries(scores.map((row) => [row.agent_name, row.performance_score])),
      ).toEqual({
        'Agent 0': 0.01,
        'Agent 1': 2.67,
        'Agent 2': 0.13,
        'Agent 3': 1,
        'Agent 4': 0.01,
      });
    });

    it('agents: refuses a second agent on the same wallet, and rolls back its key', async () => {
      await store.transaction((tx) => tx.agents.insert(agent(1), { hash: 'h1', prefix: 'p1' }));
      const again = store.transaction((tx) =>
        tx.agents.insert({ ...agent(1), agent_id: 'other' }, { hash: 'h2', prefix: 'p2' }),
      );
      await expect(again).rejects.toThrow();
      expect(await store.agents.count()).toBe(1);
      expect(await store.agents.findByKeyHash('h2')).toBeUndefined();
    });

    it('wallet indexes: the next one moves past every index taken', async () => {
      expect(await store.nextWalletIndex()).toBe(FIRST_AGENT_WALLET_INDEX);
      await store.transaction((tx) => tx.takeWalletIndex(FIRST_AGENT_WALLET_INDEX + 5));
      expect(await store.nextWalletIndex()).toBe(FIRST_AGENT_WALLET_INDEX + 6);
      await store.transaction((tx) => tx.takeWalletIndex(FIRST_AGENT_WALLET_INDEX + 2));
      expect(await store.nextWalletIndex()).toBe(FIRST_AGENT_WALLET_INDEX + 6);
    });

    it('nonces: issues, finds, consumes once, and not once expired', async () => {
      const row = {
        nonce: 'n-1',
        wallet: '0xabc',
        domain: 'localhost',
        issued_at: 1000,
        expires_at: 1300,
      };
      await store.nonces.issue(row);
      expect(await store.nonces.find('n-1')).toEqual({ ...row, consumed_at: null });
      expect(await store.nonces.consume('n-1', 1100)).toBe(true);
      expect(await store.nonces.consume('n-1', 1101)).toBe(false);
      expect((await store.nonces.find('n-1'))?.consumed_at).toBe(1100);

      await store.nonces.issue({ ...row, nonce: 'n-2', issued_at: 2000, expires_at: 2300 });
      expect(await store.nonces.consume('n-2', 2300)).toBe(false);
      // Issuing past the hour after n-1's expiry drops it.
      await store.nonces.issue({ ...row, nonce: 'n-3', issued_at: 5000, expires_at: 5300 });
      expect(await store.nonces.find('n-1')).toBeUndefined();
      expect(await store.nonces.find('n-2')).toBeDefined();
    });

    it('faucet: records a drip, and a later one in its place', async () => {
      await store.transaction((tx) => tx.agents.insert(agent(1), { hash: 'h', prefix: 'p' }));
      expect(await store.faucet.lastDripAt('agent-1')).toBeUndefined();
      await store.faucet.recordDrip('agent-1', 100, '0xaa');
      await store.faucet.recordDrip('agent-1', 200, '0xbb');
      expect(await store.faucet.lastDripAt('agent-1')).toBe(200);
    });

    it('nodes: inserts, lists in order, finds by key hash, refuses a key hash twice', async () => {
      const one = { node_id: 'n1', name: 'one', operator_address: '0x01', created_at: 20 };
      const two = { node_id: 'n2', name: 'two', operator_address: '0x02', created_at: 10 };
      await store.nodes.insert(one, 'k1');
      await store.nodes.insert(two, 'k2');
      expect(await store.nodes.list()).toEqual([two, one]);
      expect(await store.nodes.findByKeyHash('k1')).toEqual(one);
      await expect(store.nodes.insert({ ...one, node_id: 'n3' }, 'k1')).rejects.toThrow();
      expect(await store.nodes.list()).toHaveLength(2);
    });

    it('onboarding: enqueues with the agent, lists in order, counts, removes', async () => {
      await store.transaction(async (tx) => {
        for (const n of [1, 2, 3]) {
          await tx.agents.insert(agent(n), { hash: `h${n}`, prefix: `p${n}` });
          await tx.onboarding.enqueue({
            agent_id: `agent-${n}`,
            agent_address: agent(n).agent_address,
            registered_wallet: agent(n).wallet_address,
            queued_at: 100 - n,
          });
        }
      });
      expect(await store.onboarding.count()).toBe(3);
      expect((await store.onboarding.waiting()).map((row) => row.agent_id)).toEqual([
        'agent-3',
        'agent-2',
        'agent-1',
      ]);
      await store.transaction((tx) => tx.onboarding.remove(['agent-1', 'agent-3']));
      expect(await store.onboarding.waiting()).toEqual([
        {
          agent_id: 'agent-2',
          agent_address: agent(2).agent_address,
          registered_wallet: agent(2).wallet_address,
          queued_at: 98,
        },
      ]);
    });

    it('chain log: appends with the records, reads ranges, rehashes, truncates', async () => {
      expect(await store.chainLog.last()).toBeUndefined();
      const outcomes = await store.commitBlocks(
        [block(1, ['0x01', '0x02']), block(2), block(3, ['0x03'])],
        [(tx) => tx.meta.set('with-blocks', 'yes')],
      );
      expect(outcomes.map((outcome) => outcome.ok)).toEqual([true]);
      expect(await store.meta.get('with-blocks')).toBe('yes');
      expect(await store.chainLog.find(1)).toEqual(block(1, ['0x01', '0x02']));
      expect((await store.chainLog.after(1)).map((each) => each.number)).toEqual([2, 3]);
      expect((await store.chainLog.next(0, 2)).map((each) => each.number)).toEqual([1, 2]);
      expect((await store.chainLog.last())?.number).toBe(3);

      const rehashed = block(9);
      await store.chainLog.rehash(2, rehashed.hash, rehashed.parentHash);
      expect(await store.chainLog.find(2)).toMatchObject({
        hash: rehashed.hash,
        parentHash: rehashed.parentHash,
      });
      await store.transaction((tx) => tx.chainLog.truncateThrough(2));
      expect((await store.chainLog.after(0)).map((each) => each.number)).toEqual([3]);
      // A block logged twice is refused, with the rows of its commit.
      await expect(
        store.commitBlocks([block(3)], [(tx) => tx.meta.set('twice', 'yes')]),
      ).rejects.toThrow();
      expect(await store.meta.get('twice')).toBeUndefined();
    });

    it('meta: sets, reads, and sets again in place', async () => {
      expect(await store.meta.get('clock_offset')).toBeUndefined();
      await store.meta.set('clock_offset', '10');
      await store.meta.set('clock_offset', '20');
      expect(await store.meta.get('clock_offset')).toBe('20');
    });

    it('idempotency: stores the answer bytes as given, replaces, counts per scope, purges', async () => {
      const answer = new Uint8Array([0, 1, 2, 250, 255, 0]);
      const row = {
        id: 'id-1',
        scope: 'scope-a',
        fingerprint: 'f1',
        status: 201,
        answer,
        created_ms: 1_700_000_000_000,
        outlives_restore: 0 as const,
      };
      await store.transaction(async (tx) => {
        await tx.idempotency.insert(row);
        await tx.idempotency.insert({ ...row, id: 'id-2', created_ms: 1_700_000_000_500 });
        await tx.idempotency.insert({ ...row, id: 'id-3', scope: 'scope-b', outlives_restore: 1 });
      });
      const found = await store.idempotency.find('id-1');
      expect({ ...found, answer: Buffer.from(found?.answer ?? []) }).toEqual({
        ...row,
        answer: Buffer.from(answer),
      });
      expect(found?.answer).toBeInstanceOf(Uint8Array);
      expect(await store.idempotency.count()).toBe(3);
      expect(await store.idempotency.countOf('scope-a')).toBe(2);
      expect(await store.idempotency.countOf('nobody')).toBe(0);

      await store.transaction((tx) =>
        tx.idempotency.insert({ ...row, fingerprint: 'f2', status: 409, answer: new Uint8Array() }),
      );
      expect(await store.idempotency.find('id-1')).toMatchObject({
        fingerprint: 'f2',
        status: 409,
      });
      expect((await store.idempotency.find('id-1'))?.answer).toHaveLength(0);

      expect(await store.idempotency.purge(1_700_000_000_001)).toBe(2);
      expect(await store.idempotency.count()).toBe(1);
      expect(await store.idempotency.find('id-2')).toBeDefined();
    });

    it('savepoints: a record that fails loses its rows only, and a nested one only its own', async () => {
      const outcomes = await store.commitBlocks(
        [block(1)],
        [
          async (tx) => {
            await tx.meta.set('outer', '1');
            const inner = await tx.savepoint(async (nested) => {
              await nested.meta.set('inner', '1');
              throw new Error('inner failed');
            });
            return inner.ok;
          },
          async (tx) => {
            await tx.nodes.insert(
              { node_id: 'n', name: 'n', operator_address: '0x', created_at: 1 },
              'k',
            );
            // A statement that fails inside the record: the record's savepoint undoes it.
            await tx.nodes.insert(
              { node_id: 'n', name: 'n', operator_address: '0x', created_at: 1 },
              'k',
            );
          },
        ],
      );
      expect(outcomes.map((outcome) => (outcome.ok ? outcome.value : 'failed'))).toEqual([
        false,
        'failed',
      ]);
      expect(await store.meta.get('outer')).toBe('1');
      expect(await store.meta.get('inner')).toBeUndefined();
      expect(await store.nodes.list()).toEqual([]);
      expect((await store.chainLog.last())?.number).toBe(1);
    });

    it('serializes write transactions: concurrent read-then-write increments lose none', async () => {
      await store.meta.set('counter', '0');
      await Promise.all(
        Array.from({ length: 20 }, () =>
          store.transaction(async (tx) => {
            const value = Number(await tx.meta.get('counter'));
            await tx.meta.set('counter', String(value + 1));
          }),
        ),
      );
      expect(await store.meta.get('counter')).toBe('20');
    });
  },
);
