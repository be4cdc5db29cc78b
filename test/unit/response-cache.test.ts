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
});
