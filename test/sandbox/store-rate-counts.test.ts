import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { openStore, type Store } from '../../src/sandbox/store/index.ts';
import { KEY_MAX_CHARS } from '../../src/sandbox/store/rate-counts.ts';
import { STORE_BACKENDS } from '../helpers/store-backends.ts';

const MINUTE = 60_000;
const DAY = 86_400_000;
const T0 = 1_800_000_000_000;

/**
 * The rate limits' counts (store/rate-counts.ts) on SQLite and on PostgreSQL: windows, their
 * expiry and purge, the table's bound, and exact counts under requests made at once.
 */
describe.each(STORE_BACKENDS.map((backend) => backend()))('rate counts on $name', (backend) => {
  let store: Store;
  beforeAll(() => backend.start());
  afterAll(() => backend.stop());
  beforeEach(async () => {
    store = await backend.open();
  });
  afterEach(() => store.close());

  it('counts in a window that starts at the first request, and starts the next after it', async () => {
    const counts = store.rateCounts;
    expect(await counts.increment('public:10.0.0.1', MINUTE, T0)).toEqual({
      count: 1,
      expiresMs: T0 + MINUTE,
    });
    expect(await counts.increment('public:10.0.0.1', MINUTE, T0 + 10)).toEqual({
      count: 2,
      expiresMs: T0 + MINUTE,
    });
    expect(await counts.increment('public:10.0.0.1', MINUTE, T0 + MINUTE - 1)).toEqual({
      count: 3,
      expiresMs: T0 + MINUTE,
    });
    // The window is over at its end: the next request is the first of a new one.
    expect(await counts.increment('public:10.0.0.1', MINUTE, T0 + MINUTE)).toEqual({
      count: 1,
      expiresMs: T0 + 2 * MINUTE,
    });
    // Another key, and the same key's day window, count apart.
    expect((await counts.increment('public:10.0.0.2', MINUTE, T0 + MINUTE)).count).toBe(1);
    expect(await counts.increment('public:10.0.0.1', DAY, T0 + MINUTE)).toEqual({
      count: 1,
      expiresMs: T0 + MINUTE + DAY,
    });
    expect((await counts.increment('public:10.0.0.1', MINUTE, T0 + MINUTE + 1)).count).toBe(2);
  });

  it('keeps a key longer than it stores as its hash, counted like any other', async () => {
    const counts = store.rateCounts;
    const long = `public:${'f'.repeat(KEY_MAX_CHARS * 10)}`;
    expect((await counts.increment(long, MINUTE, T0)).count).toBe(1);
    expect((await counts.increment(long, MINUTE, T0)).count).toBe(2);
    expect((await counts.increment(`${long}0`, MINUTE, T0)).count).toBe(1);
    expect(await counts.peek(long, MINUTE)).toEqual({ count: 2, expiresMs: T0 + MINUTE });
  });

  it('purges the windows that are over, and no other', async () => {
    const counts = store.rateCounts;
    await counts.increment('a', MINUTE, T0);
    await counts.increment('b', MINUTE, T0 + 1000);
    await counts.increment('a', DAY, T0);
    expect(await counts.purge(T0 + MINUTE)).toEqual({ expired: 1, evicted: 0 });
    expect(await counts.peek('a', MINUTE)).toBeUndefined();
    expect(await counts.peek('b', MINUTE)).toEqual({ count: 1, expiresMs: T0 + 1000 + MINUTE });
    expect(await counts.size()).toBe(2);
    expect(await counts.purge(T0 + DAY)).toEqual({ expired: 2, evicted: 0 });
    expect(await counts.size()).toBe(0);
  });

  it('at the bound, forgets the rows with the fewest requests first', async () => {
    const counts = store.rateCounts;
    // Five callers with 1 to 5 requests each, the fewest in the newest window.
    for (let caller = 1; caller <= 5; caller++) {
      for (let n = 0; n < caller; n++) await counts.increment(`c${caller}`, MINUTE, T0 - caller);
    }
    expect(await counts.purge(T0, 3)).toEqual({ expired: 0, evicted: 2 });
    expect(await counts.size()).toBe(3);
    expect(await counts.peek('c1', MINUTE)).toBeUndefined();
    expect(await counts.peek('c2', MINUTE)).toBeUndefined();
    for (const caller of [3, 4, 5]) {
      expect((await counts.peek(`c${caller}`, MINUTE))?.count).toBe(caller);
    }
    // Within the bound, nothing more goes.
    expect(await counts.purge(T0, 3)).toEqual({ expired: 0, evicted: 0 });
  });

  it('gives requests made at once, through two stores on one database, exact counts', async () => {
    // Two stores: two servers sharing the database, each with its own connections.
    const other = await backend.reopen();
    try {
      const made = await Promise.all(
        Array.from({ length: 200 }, (_, i) =>
          (i % 2 === 0 ? store : other).rateCounts.increment('shared', MINUTE, T0),
        ),
      );
      // Each request got its own count: 1 to 200, none twice.
      expect(made.map((each) => each.count).sort((a, b) => a - b)).toEqual(
        Array.from({ length: 200 }, (_, i) => i + 1),
      );
      expect(await store.rateCounts.peek('shared', MINUTE)).toEqual({
        count: 200,
        expiresMs: T0 + MINUTE,
      });
    } finally {
      await other.close();
    }
  });
});

describe('rate counts and a restore (SQLite, where snapshots are files)', () => {
  it('keeps today’s counts, and takes none from the snapshot', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'agentctl-rate-'));
    const store = openStore(join(dir, 'sandbox.db'), { durable: false });
    try {
      await store.rateCounts.increment('public:10.0.0.1', MINUTE, T0);
      await store.rateCounts.increment('public:10.0.0.9', MINUTE, T0);
      await store.copyTo(join(dir, 'copy.db'));
      await store.rateCounts.increment('public:10.0.0.1', MINUTE, T0 + 1);
      await store.rateCounts.purge(T0 + 2, 1);
      // Today: 10.0.0.1 at 2 (10.0.0.9, 1 request, forgotten at the bound); the copy: both at 1.
      await store.replaceFrom(join(dir, 'copy.db'));
      expect(await store.rateCounts.peek('public:10.0.0.1', MINUTE)).toEqual({
        count: 2,
        expiresMs: T0 + MINUTE,
      });
      expect(await store.rateCounts.peek('public:10.0.0.9', MINUTE)).toBeUndefined();
      // A new sandbox's state (no snapshot) keeps them too.
      await store.replaceFrom(undefined);
      expect(await store.rateCounts.size()).toBe(1);
    } finally {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
