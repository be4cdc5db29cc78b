import { describe, expect, it } from 'vitest';
import { RpcError, RpcUnreachableError } from '../../src/sandbox/chain/rpc.ts';
import { classifyLogsError, createLogSource } from '../../src/sandbox/indexer/log-source.ts';

const answered = (code: number, message: string, data?: unknown) =>
  new RpcError('eth_getLogs', code, message, data);

describe('an eth_getLogs failure', () => {
  it.each([
    [
      'Alchemy, with the range it suggests',
      answered(
        -32602,
        'Log response size exceeded. You can make eth_getLogs requests with up to a 2K block range and no limit on the response size, or you can request any block range with a cap of 10K logs in the response. Based on your parameters, this block range should work: [0x0, 0x1f3]',
      ),
      1000,
      { kind: 'range', blocks: 500 },
    ],
    [
      'Infura, with the range it suggests',
      answered(
        -32005,
        'query returned more than 10000 results. Try with this block range [0x10, 0x4f].',
      ),
      1000,
      { kind: 'range', blocks: 64 },
    ],
    [
      'geth, without a size',
      answered(-32005, 'query returned more than 10000 results'),
      1000,
      { kind: 'range', blocks: 500 },
    ],
    [
      'QuickNode, naming its limit',
      answered(-32602, 'eth_getLogs is limited to a 10,000 range'),
      20_000,
      { kind: 'range', blocks: 10_000 },
    ],
    [
      'a named limit at or above the range refused (a cap on results): half',
      answered(-32602, 'eth_getLogs is limited to a 10,000 range'),
      500,
      { kind: 'range', blocks: 250 },
    ],
    [
      'Erigon, naming its limit',
      answered(-32000, 'exceed maximum block range: 5000'),
      8000,
      { kind: 'range', blocks: 5000 },
    ],
    [
      'a range "too large", -32602',
      answered(-32602, 'block range is too large'),
      101,
      { kind: 'range', blocks: 50 },
    ],
    [
      'the range text in the error data',
      answered(-32000, 'invalid params', 'block range too large'),
      64,
      { kind: 'range', blocks: 32 },
    ],
    [
      'Cloudflare',
      answered(-32047, 'Invalid eth_getLogs request. Max range: 800'),
      1000,
      { kind: 'range', blocks: 800 },
    ],
    [
      'Avalanche',
      answered(-32000, 'requested too many blocks from 0 to 9000, maximum is set to 2048'),
      9001,
      { kind: 'range', blocks: 2048 },
    ],
    [
      'Infura’s rate limit, also -32005',
      answered(-32005, 'daily request count exceeded, request rate limited'),
      1000,
      { kind: 'transient' },
    ],
    ['an internal error', answered(-32603, 'internal error'), 1000, { kind: 'transient' }],
    [
      'invalid params without range text',
      answered(-32602, 'invalid argument 0: hex string without 0x prefix'),
      1000,
      { kind: 'transient' },
    ],
    [
      'a node that does not answer',
      new RpcUnreachableError('http://127.0.0.1:1', new Error('connect ECONNREFUSED')),
      1000,
      { kind: 'transient' },
    ],
    ['any other error', new Error('socket hang up'), 1000, { kind: 'transient' }],
  ])('is told apart: %s', (_name, error, requested, expected) => {
    expect(classifyLogsError(error, requested)).toEqual(expected);
  });
});

/** A provider over blocks 1..∞ with one log a block, refusing calls over `limit()` blocks. */
function provider(limit: () => number) {
  const calls: Array<{ from: number; to: number; ok: boolean }> = [];
  let failures: Error[] = [];
  return {
    calls,
    /** The next calls fail with these errors, in order. */
    failNext(...errors: Error[]) {
      failures = errors;
    },
    async fetch(from: number, to: number): Promise<number[]> {
      const failure = failures.shift();
      const refused = to - from + 1 > limit();
      calls.push({ from, to, ok: !failure && !refused });
      if (failure) throw failure;
      if (refused) throw answered(-32602, 'block range is too large');
      return Array.from({ length: to - from + 1 }, (_, i) => from + i);
    },
  };
}

const outage = () => new RpcUnreachableError('http://127.0.0.1:1', new Error('socket hang up'));
const blocks = (from: number, to: number) =>
  Array.from({ length: to - from + 1 }, (_, i) => from + i);

describe('the log source', () => {
  it('shrinks a refused range and still reads every block once, in order', async () => {
    const node = provider(() => 8);
    const source = createLogSource({ fetch: node.fetch, maxBlocks: 100, growAfter: 1000 });
    expect(await source.read(1, 100)).toEqual(blocks(1, 100));
    expect(source.blocksPerCall()).toBeLessThanOrEqual(8);
    expect(node.calls.filter((call) => call.ok).every((call) => call.to - call.from < 8)).toBe(
      true,
    );
  });

  it('tries a transient failure again at the same size, and does not shrink', async () => {
    const node = provider(() => 1000);
    const source = createLogSource({
      fetch: node.fetch,
      maxBlocks: 50,
      retries: 3,
      retryPauseMs: 1,
    });
    node.failNext(outage(), answered(-32603, 'internal error'), outage());
    expect(await source.read(1, 100)).toEqual(blocks(1, 100));
    expect(source.blocksPerCall()).toBe(50);
    // Three failures, then the same range again, then the rest.
    expect(node.calls.map(({ from, to }) => [from, to])).toEqual([
      [1, 50],
      [1, 50],
      [1, 50],
      [1, 50],
      [51, 100],
    ]);
  });

  it('throws an outage longer than its retries, and reads at the same size once it is over', async () => {
    const node = provider(() => 8);
    const source = createLogSource({
      fetch: node.fetch,
      maxBlocks: 8,
      retries: 2,
      retryPauseMs: 1,
    });
    node.failNext(outage(), outage(), outage());
    await expect(source.read(1, 40)).rejects.toThrow(RpcUnreachableError);
    expect(source.blocksPerCall()).toBe(8);
    node.calls.length = 0;
    expect(await source.read(1, 40)).toEqual(blocks(1, 40));
    expect(node.calls.map(({ from, to }) => to - from + 1)).toEqual([8, 8, 8, 8, 8]);
  });

  it('grows back to its maximum after runs of successes once the provider takes more', async () => {
    let limit = 4;
    const node = provider(() => limit);
    const source = createLogSource({ fetch: node.fetch, maxBlocks: 32, growAfter: 2 });
    expect(await source.read(1, 64)).toEqual(blocks(1, 64));
    // A dense stretch: every try at 8 blocks was refused, back to 4.
    const served = node.calls.filter((call) => call.ok).map(({ from, to }) => to - from + 1);
    expect(served.every((size) => size === 4)).toBe(true);
    // It is over: the provider takes any range again.
    limit = 1000;
    node.calls.length = 0;
    expect(await source.read(65, 300)).toEqual(blocks(65, 300));
    const sizes = node.calls.map(({ from, to }) => to - from + 1);
    // Two calls at each size, doubling, then the maximum until the range's tail.
    expect(sizes.slice(0, 4)).toEqual([8, 8, 16, 16]);
    expect(sizes.slice(4, -1).every((size) => size === 32)).toBe(true);
    expect(sizes.length).toBe(10);
    expect(source.blocksPerCall()).toBe(32);
  });

  it('goes no further than the provider takes when it grows: one refusal, then the same size', async () => {
    const node = provider(() => 8);
    const source = createLogSource({ fetch: node.fetch, maxBlocks: 64, growAfter: 3 });
    await source.read(1, 400);
    const refused = node.calls.filter((call) => !call.ok).map(({ from, to }) => to - from + 1);
    // Each try at 16 is refused once and halves back to 8; nothing smaller is ever asked for
    // but the range's tail.
    expect(refused.slice(0, 3)).toEqual([64, 32, 16]);
    expect(refused.slice(3).every((size) => size === 16)).toBe(true);
    const served = node.calls.filter((call) => call.ok && call.to < 400);
    expect(served.every((call) => call.to - call.from + 1 === 8)).toBe(true);
  });

  it('refuses a single block the provider will not take, rather than loop', async () => {
    const node = provider(() => 0);
    const source = createLogSource({ fetch: node.fetch, maxBlocks: 4 });
    await expect(source.read(1, 4)).rejects.toThrow('block range is too large');
    expect(node.calls.length).toBe(3);
  });
});
