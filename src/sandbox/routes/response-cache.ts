import type { FastifyReply } from 'fastify';

/** The bounds of a route's kept answers (GET /v1's, GraphQL's): so many entries, so many bytes. */
export const ANSWER_CACHE_LIMITS = { maxEntries: 2000, maxBytes: 32 * 1024 * 1024 } as const;

/**
 * Pre-serialised answers for reads that many clients repeat (the leaderboard, the stats).
 * Each entry is kept until `version` changes: callers pass a value that every write which
 * changes the answer moves (a store's change counter, the chain's head). A string key counts
 * toward maxBytes with its answer: a key can be as long as a request (a URL, a body).
 */
export function createResponseCache<Key>(options: { maxEntries?: number; maxBytes?: number } = {}) {
  // Many keys (one per URL, say) between two writes must not grow memory without bound.
  const maxEntries = options.maxEntries ?? Number.POSITIVE_INFINITY;
  const maxBytes = options.maxBytes ?? Number.POSITIVE_INFINITY;
  let cachedVersion: unknown;
  let bytes = 0;
  const entries = new Map<Key, Buffer>();

  function clear(): void {
    entries.clear();
    bytes = 0;
  }

  /** The answer kept for `key` at `version` (the version now), if any. */
  function lookup(key: Key, version: unknown): Buffer | undefined {
    if (version !== cachedVersion) {
      clear();
      cachedVersion = version;
    }
    return entries.get(key);
  }

  /**
   * Keeps `body` for `key` if it was built at the version it is still at: `before` is the
   * version when the build started, `now` the version as it is done.
   */
  function keep(key: Key, before: unknown, now: unknown, body: Buffer): void {
    // A write that landed while the answer was built makes it stale already.
    if (now !== before || cachedVersion !== before || entries.has(key)) return;
    const size = body.length + (typeof key === 'string' ? Buffer.byteLength(key) : 0);
    if (size > maxBytes) return;
    if (entries.size >= maxEntries || bytes + size > maxBytes) clear();
    entries.set(key, body);
    bytes += size;
  }

  return {
    lookup,
    /** What is kept: entries, and their bytes (answers and keys). */
    size: () => ({ entries: entries.size, bytes }),
    keep,
    async send(
      reply: FastifyReply,
      key: Key,
      version: () => unknown,
      build: () => unknown | Promise<unknown>,
    ): Promise<FastifyReply> {
      const before = version();
      let body = lookup(key, before);
      if (!body) {
        body = Buffer.from(JSON.stringify(await build()));
        keep(key, before, version(), body);
      }
      return reply.type('application/json; charset=utf-8').send(body);
    },
  };
}
