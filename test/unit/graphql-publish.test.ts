import { describe, expect, it } from 'vitest';
import type { Live } from '../../src/sandbox/graphql/live.ts';
import { MAX_WAITING_TRANSACTIONS, publishCommits } from '../../src/sandbox/graphql/publish.ts';
import type { IndexCommit } from '../../src/sandbox/indexer/indexer.ts';
import type { DataQueries } from '../../src/sandbox/indexer/queries.ts';

/**
 * Index commits → subscription events (graphql/publish.ts) when reading what a commit
 * recorded takes time, as a read of PostgreSQL does: each read is held here until the test
 * lets it answer, so that a later commit's read could finish first.
 */
type Key = { blockNumber: number; logIndex: number };

function setUp() {
  let commit: (changes: IndexCommit) => void = () => {};
  /** Each read of transactions, with its keys, answered when the test says. */
  const reads: Array<{ keys: Key[]; answer: () => void }> = [];
  const published: string[] = [];
  const warnings: string[] = [];
  const queries = {
    summaries: async () => [],
    transactionsAt: (keys: Key[]) =>
      new Promise((resolve) => {
        reads.push({
          keys: [...keys],
          answer: () =>
            resolve(
              keys.map((key) => ({
                hash: `0x${key.blockNumber}`,
                type: 'deposit',
                vault: '0x0000000000000000000000000000000000000001',
                user: '0x0000000000000000000000000000000000000002',
                amount: String(key.blockNumber),
                shares: null,
                status: 'claimed',
                timestamp: '2026-11-26T00:00:00Z',
                blockNumber: key.blockNumber,
                logIndex: key.logIndex,
              })),
            ),
        });
      }),
  } as unknown as DataQueries;
  const live = {
    listened: () => false,
    listenedUnder: (prefix: string) => prefix === 'transactions:',
    publish: (topic: string, payload: { transactionCreated: { amount: string } }) => {
      if (topic === 'transactions:*') published.push(payload.transactionCreated.amount);
    },
  } as unknown as Live;
  publishCommits(
    {
      onCommit: (listener) => {
        commit = listener;
        return () => {};
      },
    },
    queries,
    live,
    { warn: (message) => warnings.push(message) },
  );
  const recorded = (...blocks: number[]): IndexCommit => ({
    vaults: new Set(),
    transactions: blocks.map((blockNumber) => ({ blockNumber, logIndex: 0 })),
    reorg: false,
  });
  return {
    commit: (...blocks: number[]) => commit(recorded(...blocks)),
    reads,
    published,
    warnings,
  };
}

/** Lets whatever is scheduled run (the publisher starts after the indexer's step). */
async function settle(): Promise<void> {
  for (let i = 0; i < 5; i++) await new Promise((resolve) => setImmediate(resolve));
}

describe('events from index commits, read asynchronously', () => {
  it('go out in commit order: a commit made during a read waits for it, and those waiting are read as one', async () => {
    const { commit, reads, published } = setUp();
    commit(1);
    await settle();
    expect(reads.map((read) => read.keys)).toEqual([[{ blockNumber: 1, logIndex: 0 }]]);
    commit(2);
    commit(3);
    await settle();
    // Block 2's read would otherwise answer before block 1's.
    expect(reads).toHaveLength(1);
    reads[0]?.answer();
    await settle();
    expect(published).toEqual(['1']);
    expect(reads[1]?.keys.map((key) => key.blockNumber)).toEqual([2, 3]);
    reads[1]?.answer();
    await settle();
    expect(published).toEqual(['1', '2', '3']);
  });

  it('keep at most MAX_WAITING_TRANSACTIONS waiting behind a slow read, and say how many were skipped', async () => {
    const { commit, reads, published, warnings } = setUp();
    commit(1);
    await settle();
    const many = Array.from({ length: MAX_WAITING_TRANSACTIONS + 5 }, (_, i) => i + 2);
    commit(...many);
    reads[0]?.answer();
    await settle();
    expect(reads[1]?.keys).toHaveLength(MAX_WAITING_TRANSACTIONS);
    reads[1]?.answer();
    await settle();
    expect(published).toHaveLength(1 + MAX_WAITING_TRANSACTIONS);
    expect(warnings).toEqual([
      expect.stringMatching(/^5 transactionCreated event\(s\) were skipped/),
    ]);
  });
});
