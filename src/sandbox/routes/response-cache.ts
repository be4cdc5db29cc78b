import type { FastifyReply } from 'fastify';

/**
 * Pre-serialised answers for reads that many clients repeat (the leaderboard, the stats).
 * Each entry is kept until `version` changes: callers pass a value that every write which
 * changes the answer moves (a store's change counter, the chain's head).
 */
export function createResponseCache<Key>(options: { maxEntries?: number } = {}) {
  // Many keys (one per URL, say) between two writes must not grow memory without bound.
  const maxEntries = options.maxEntries ?? Number.POSITIVE_INFINITY;
  let cachedVersion: unknown;
  const entries = new Map<Key, Buffer>();
  return {
    async send(
      reply: FastifyReply,
      key: Key,
      version: () => unknown,
      build: () => unknown | Promise<unknown>,
    ): Promise<FastifyReply> {
      const before = version();
      if (before !== cachedVersion) {
        entries.clear();
        cachedVersion = before;
      }
      let body = entries.get(key);
      if (!body) {
        body = Buffer.from(JSON.stringify(await build()));
        // A write that landed while the answer was built makes it stale already.
        if (version() === before && cachedVersion === before) {
          if (entries.size >= maxEntries) entries.clear();
          entries.set(key, body);
        }
      }
      return reply.type('application/json; charset=utf-8').send(body);
    },
  };
}
