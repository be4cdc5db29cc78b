import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Hash, type Hex, keccak256 } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type AnvilProcess, startAnvil } from '../../../src/sandbox/chain/anvil.ts';
import { createBlockProducer } from '../../../src/sandbox/chain/producer.ts';
import { createRpcClient, type RpcClient } from '../../../src/sandbox/chain/rpc.ts';
import type { StoreTx } from '../../../src/sandbox/store/index.ts';
import type { LoggedBlock } from '../../../src/sandbox/store/types.ts';

/**
 * The producer's ordering, against a real anvil: what it commits, and that nothing is
 * answered before the commit is on disk. The disk is the one part faked here: `sync` is
 * a promise the test releases, since a power loss cannot be caused from a test.
 */
let dir: string;
let anvil: AnvilProcess;
beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'agentctl-producer-'));
  anvil = await startAnvil({ stateDir: dir, mining: 'manual' });
});
afterAll(async () => {
  await anvil.stop();
  rmSync(dir, { recursive: true, force: true });
});

async function producerOnAnvil(rpc: RpcClient = createRpcClient(anvil.rpcUrl)) {
  const latest = await rpc.call<{ number: Hex; hash: Hash; timestamp: Hex }>(
    'eth_getBlockByNumber',
    ['latest', false],
  );
  const events: string[] = [];
  const committed: LoggedBlock[] = [];
  const unreleased: Array<() => void> = [];
  const producer = createBlockProducer({
    rpc,
    head: { number: Number(latest.number), hash: latest.hash, timestamp: Number(latest.timestamp) },
    nowSeconds: () => Math.floor(Date.now() / 1000),
    async commit(blocks, records) {
      committed.push(...blocks);
      events.push(`commit ${blocks.map((block) => block.number).join(',')}`);
      // No store here: no record of these tests uses its transaction.
      const outcomes = [];
      for (const record of records) {
        outcomes.push({ ok: true as const, value: await record(undefined as unknown as StoreTx) });
      }
      return outcomes;
    },
    sync() {
      events.push('sync started');
      return new Promise((resolve) => {
        unreleased.push(() => {
          events.push('sync done');
          resolve();
        });
      });
    },
    revertReason: async () => 'reverted',
    onDiverged: (error) => events.push(`diverged: ${error.message}`),
    baseFee: 1_000_000_000n,
    log: { warn: (message) => events.push(`warn: ${message}`) },
  });
  /** Lets every fsync begun so far finish. */
  const release = () => {
    for (const done of unreleased.splice(0)) done();
  };
  return { producer, events, committed, release };
}

describe('the block producer', () => {
  it('answers a write only after its block and rows are committed and fsynced', async () => {
    const { producer, events, committed, release } = await producerOnAnvil();
    let answered = false;
    const write = producer
      .submit({
        txs: [],
        advance: 60,
        record: async () => events.push('record'),
      })
      .then(() => {
        answered = true;
        events.push('answered');
      });
    while (!events.includes('sync started')) await new Promise((r) => setTimeout(r, 5));
    // The producer makes the next block while this one's fsync runs: once that block is
    // committed too, a write answered without waiting for its fsync would have been answered.
    const next = producer.submit({ txs: [], record: async () => events.push('next record') });
    while (events.filter((e) => e === 'sync started').length < 2) {
      await new Promise((r) => setTimeout(r, 5));
    }
    expect(answered).toBe(false);
    release();
    await Promise.all([write, next]);
    const [block, nextBlock] = committed.slice(-2) as [LoggedBlock, LoggedBlock];
    expect(events).toEqual([
      `commit ${block.number}`,
      'record',
      'sync started',
      `commit ${nextBlock.number}`,
      'next record',
      'sync started',
      'sync done',
      'sync done',
      'answered',
    ]);
    expect(block.timestamp).toBeGreaterThanOrEqual(Math.floor(Date.now() / 1000) + 59);
  });

  it('logs blocks that someone else mined over the RPC URL before its own', async () => {
    const { producer, committed, release, events } = await producerOnAnvil();
    const rpc = createRpcClient(anvil.rpcUrl);
    await rpc.call('evm_mine');
    await rpc.call('evm_mine');
    const write = producer.submit({ txs: [] });
    while (!events.includes('sync started')) await new Promise((r) => setTimeout(r, 5));
    release();
    await write;
    const numbers = committed.map((block) => block.number);
    expect(numbers).toHaveLength(3);
    expect(numbers[1]).toBe((numbers[0] as number) + 1);
    expect(numbers[2]).toBe((numbers[1] as number) + 1);
    // Each logged block names its parent: the log is one unbroken chain.
    expect(committed[1]?.parentHash).toBe(committed[0]?.hash);
    expect(committed[2]?.parentHash).toBe(committed[1]?.hash);
  });

  it("answers with its transaction's receipt, also when someone else mines right after it", async () => {
    const rpc = createRpcClient(anvil.rpcUrl);
    const account = privateKeyToAccount(generatePrivateKey());
    await rpc.call('anvil_setBalance', [account.address, '0xde0b6b3a7640000']);
    const transfer = async (nonce: number) => {
      const raw = await account.signTransaction({
        type: 'eip1559',
        chainId: Number(await rpc.call<Hex>('eth_chainId')),
        nonce,
        gas: 21_000n,
        maxFeePerGas: 10n ** 10n,
        maxPriorityFeePerGas: 0n,
        to: account.address,
        value: 1n,
      });
      return { raw, hash: keccak256(raw), label: 'a transfer' };
    };
    // The fault: another block mined the moment after each of the producer's.
    let foreign = false;
    const racing: RpcClient = {
      url: rpc.url,
      batch: (calls) => rpc.batch(calls),
      async call<T>(method: string, params?: unknown[]) {
        const result = await rpc.call<T>(method, params);
        if (method === 'evm_mine' && foreign) await rpc.call('evm_mine');
        return result;
      },
    };
    const { producer, committed, release, events } = await producerOnAnvil(racing);
    const sent = async (nonce: number) => {
      const tx = await transfer(nonce);
      const write = producer.submit({ txs: [tx] });
      while (events.filter((e) => e === 'sync started').length <= nonce) {
        await new Promise((r) => setTimeout(r, 5));
      }
      release();
      const { receipts } = await write;
      expect(receipts.map((r) => [r.transactionHash, r.status])).toEqual([[tx.hash, 'success']]);
      return tx.hash;
    };

    const alone = await sent(0);
    expect(committed.at(-1)?.txHashes).toEqual([alone]);
    foreign = true;
    const raced = await sent(1);
    const [ours, theirs] = committed.slice(-2);
    expect(ours?.txHashes).toEqual([raced]);
    expect(theirs?.txHashes).toEqual([]);
    expect(theirs?.parentHash).toBe(ours?.hash);
    expect(theirs?.number).toBe((ours?.number as number) + 1);
    expect(events.filter((e) => e.startsWith('diverged'))).toEqual([]);
  });

  it('answers a write whose transaction someone else mined before the producer could', async () => {
    const rpc = createRpcClient(anvil.rpcUrl);
    const account = privateKeyToAccount(generatePrivateKey());
    await rpc.call('anvil_setBalance', [account.address, '0xde0b6b3a7640000']);
    const raw = await account.signTransaction({
      type: 'eip1559',
      chainId: Number(await rpc.call<Hex>('eth_chainId')),
      nonce: 0,
      gas: 21_000n,
      maxFeePerGas: 10n ** 10n,
      maxPriorityFeePerGas: 0n,
      to: account.address,
      value: 1n,
    });
    const tx = { raw, hash: keccak256(raw), label: 'a transfer' };
    // The fault: between the producer's send and its read of the head, someone mines over the
    // RPC URL (anvil_mine), and that block takes the transaction.
    const racing: RpcClient = {
      url: rpc.url,
      call: (method, params) => rpc.call(method, params),
      async batch(calls) {
        const sends = calls.filter((call) => call.method === 'eth_sendRawTransaction');
        if (sends.length === 0) return rpc.batch(calls);
        const sent = await rpc.batch(sends);
        await rpc.call('anvil_mine', ['0x1']);
        const rest = await rpc.batch(calls.slice(sends.length));
        return [...sent, ...rest];
      },
    };
    const { producer, committed, release, events } = await producerOnAnvil(racing);
    const write = producer.submit({ txs: [tx], record: async () => 'recorded' });
    while (!events.includes('sync started')) await new Promise((r) => setTimeout(r, 5));
    release();
    const { receipts, recorded } = await write;
    expect(recorded).toBe('recorded');
    expect(receipts.map((r) => [r.transactionHash, r.status])).toEqual([[tx.hash, 'success']]);
    // Their block, with the transaction, is logged before the producer's own (empty) one.
    expect(committed.flatMap((block) => block.txHashes)).toContain(tx.hash);
    expect(events.filter((e) => e.startsWith('diverged'))).toEqual([]);
  });
});
