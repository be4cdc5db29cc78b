import { describe, expect, it } from 'vitest';
import { createResponseCache } from '../../src/sandbox/routes/response-cache.ts';

describe('the answer cache', () => {
  it('counts a key’s bytes with its answer: long keys cannot hold more than maxBytes', () => {
    const cache = createResponseCache<string>({ maxEntries: 100, maxBytes: 1000 });
    cache.lookup('', 1);
    // Ten 10-byte answers under 500-byte keys: 5,100 bytes in all, past the bound.
    for (let i = 0; i < 10; i++) {
      cache.keep(`${i}`.padEnd(500, 'k'), 1, 1, Buffer.alloc(10));
    }
    expect(cache.lookup('0'.padEnd(500, 'k'), 1)).toBeUndefined();
    expect(cache.lookup('9'.padEnd(500, 'k'), 1)).toBeDefined();
    expect(cache.size().bytes).toBeLessThanOrEqual(1000);
  });

  it('holds at most maxEntries, and every answer it gives is its own key’s', () => {
    const cache = createResponseCache<string>({ maxEntries: 10, maxBytes: 1_000_000 });
    cache.lookup('', 1);
    for (let i = 0; i < 35; i++) {
      cache.keep(`/v1/vaults?minTvl=${i}`, 1, 1, Buffer.from(`answer ${i}`));
      expect(cache.size().entries).toBeLessThanOrEqual(10);
    }
    // The last one kept is there; whatever else is there answers for its own key.
    expect(cache.lookup('/v1/vaults?minTvl=34', 1)?.toString()).toBe('answer 34');
    let hits = 0;
    for (let i = 0; i < 35; i++) {
      const kept = cache.lookup(`/v1/vaults?minTvl=${i}`, 1);
      if (kept) {
        hits++;
        expect(kept.toString()).toBe(`answer ${i}`);
      }
    }
    expect(hits).toBe(cache.size().entries);
    expect(hits).toBeGreaterThan(0);
  });

  it('holds at most maxBytes of answers and keys, and keeps none larger than that', () => {
    const cache = createResponseCache<string>({ maxEntries: 1000, maxBytes: 10_000 });
    cache.lookup('', 1);
    for (let i = 0; i < 100; i++) {
      const key = `key ${i}`;
      const body = Buffer.alloc(900, i);
      cache.keep(key, 1, 1, body);
      const { bytes } = cache.size();
      expect(bytes).toBeLessThanOrEqual(10_000);
      expect(cache.lookup(key, 1)?.equals(body)).toBe(true);
    }
    // The bytes counted are those kept: answers and keys.
    let counted = 0;
    for (let i = 0; i < 100; i++) {
      const kept = cache.lookup(`key ${i}`, 1);
      if (kept) counted += kept.length + Buffer.byteLength(`key ${i}`);
    }
    expect(cache.size().bytes).toBe(counted);
    // An answer over the bound on its own is not kept, and what is kept stays.
    const before = cache.size();
    cache.keep('huge', 1, 1, Buffer.alloc(10_001));
    expect(cache.lookup('huge', 1)).toBeUndefined();
    expect(cache.size()).toEqual(before);
  });

  it('answers nothing kept at another version, nor an answer built across a change', () => {
    const cache = createResponseCache<string>({ maxEntries: 10, maxBytes: 1000 });
    cache.lookup('/v1/vaults', 1);
    cache.keep('/v1/vaults', 1, 1, Buffer.from('at 1'));
    expect(cache.lookup('/v1/vaults', 1)?.toString()).toBe('at 1');
    expect(cache.lookup('/v1/vaults', 2)).toBeUndefined();
    expect(cache.size()).toEqual({ entries: 0, bytes: 0 });
    // Built at 2, finished at 3: stale already.
    cache.keep('/v1/vaults', 2, 3, Buffer.from('at 2'));
    expect(cache.lookup('/v1/vaults', 2)).toBeUndefined();
  });
});
