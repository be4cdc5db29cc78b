import { describe, expect, it, vi } from 'vitest';
import { IndexUnavailableError } from '../../src/sandbox/indexer/failure.ts';
import { ANSWER_CACHE_LIMITS } from '../../src/sandbox/routes/response-cache.ts';
import { useChainSandbox } from '../helpers/chain.ts';
import { admin, type TestSandbox } from '../helpers/sandbox.ts';

/**
 * /v1's and GraphQL's kept answers (routes/response-cache.ts) on the real app, pushed past
 * their entry bound with as many different requests. Whether an answer came from the cache
 * shows in the data API's queries: a kept answer asks them nothing, a built one asks them
 * (they may answer from their own per-commit reads, which do not tell).
 */
let sandbox: TestSandbox;
useChainSandbox((started) => {
  sandbox = started;
});

/** More different requests than the caches keep. */
const PAST_THE_BOUND = ANSWER_CACHE_LIMITS.maxEntries + 10;

// biome-ignore lint/suspicious/noExplicitAny: bodies are compared whole
type Body = any;

/**
 * Calls `send`, and says whether its answer was built (its route or resolver asked the
 * queries for the vaults) or kept.
 */
async function watched(send: () => Promise<Body>): Promise<{ body: Body; built: boolean }> {
  const asked = vi.spyOn(sandbox.runtime.index.queries, 'vaults');
  try {
    const body = await send();
    return { body, built: asked.mock.calls.length > 0 };
  } finally {
    asked.mockRestore();
  }
}

/** The versions every kept answer depends on: unchanged, no answer was dropped for a write. */
const versions = () => [sandbox.runtime.parts.indexer().version(), sandbox.store.agents.version()];

describe('the kept answers', () => {
  it('/v1: past its bound in entries, an early URL is built again and answers the same', async () => {
    const rest = async (url: string) => {
      const response = await sandbox.app.inject({ url });
      expect(response.statusCode, response.body).toBe(200);
      return response.json() as Body;
    };
    const before = versions();
    const first = await watched(() => rest('/v1/vaults?minTvl=0'));
    expect(first.built).toBe(true);
    const again = await watched(() => rest('/v1/vaults?minTvl=0'));
    expect(again).toEqual({ body: first.body, built: false });
    const all: Array<{ address: string; tvl: string }> = first.body.vaults;
    expect(all.length).toBeGreaterThan(0);
    for (let i = 1; i <= PAST_THE_BOUND; i++) {
      const min = BigInt(i) * 1_000_000n;
      const answer = await rest(`/v1/vaults?minTvl=${min}`);
      // Each URL gets its own answer, never another URL's.
      expect(answer.vaults.map((vault: { address: string }) => vault.address)).toEqual(
        all.filter((vault) => BigInt(vault.tvl) >= min).map((vault) => vault.address),
      );
    }
    const after = await watched(() => rest('/v1/vaults?minTvl=0'));
    expect(versions()).toEqual(before);
    expect(after).toEqual({ body: first.body, built: true });
  }, 60_000);

  it('GraphQL: past its bound in entries, an early document is run again and answers the same', async () => {
    const gql = async (minTvl: string) => {
      const response = await sandbox.app.inject({
        method: 'POST',
        url: '/graphql',
        payload: {
          query: 'query ($min: BigInt) { vaults(minTvl: $min) { address tvl } }',
          variables: { min: minTvl },
        },
      });
      expect(response.statusCode, response.body).toBe(200);
      const body = response.json() as Body;
      expect(body.errors).toBeUndefined();
      return body;
    };
    const before = versions();
    const first = await watched(() => gql('0'));
    expect(first.built).toBe(true);
    expect(await watched(() => gql('0'))).toEqual({ body: first.body, built: false });
    const all: Array<{ address: string; tvl: string }> = first.body.data.vaults;
    expect(all.length).toBeGreaterThan(0);
    for (let i = 1; i <= PAST_THE_BOUND; i++) {
      const min = BigInt(i) * 1_000_000n;
      const answer = await gql(min.toString());
      expect(answer.data.vaults).toEqual(all.filter((vault) => BigInt(vault.tvl) >= min));
    }
    const after = await watched(() => gql('0'));
    expect(versions()).toEqual(before);
    expect(after).toEqual({ body: first.body, built: true });
  }, 60_000);
});

/** A new commit of the index (a block that moves the clock): nothing of it is read yet. */
async function commitOnce(): Promise<void> {
  const before = sandbox.runtime.index.version();
  const advanced = await admin(sandbox.app, 'POST', '/sandbox/clock/advance', { seconds: 60 });
  expect(advanced.statusCode, advanced.body).toBe(200);
  await sandbox.runtime.parts.indexer().syncTo();
  expect(sandbox.runtime.index.version()).not.toBe(before);
}

describe('the per-commit reads behind the answers', () => {
  it('read the index once for many requests at once, however long the read takes', async () => {
    await commitOnce();
    const { view, queries } = sandbox.runtime.index;
    const read = view.read;
    let release = () => {};
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    // Every read of the data API's answers waits until all the requests have asked.
    const reads = vi.spyOn(view, 'read').mockImplementation(async (work) => {
      await held;
      return read(work);
    });
    const asked = vi.spyOn(queries, 'vaults');
    try {
      // Ten URLs: ten answers to build, none kept for another.
      const answers = Array.from({ length: 10 }, (_, i) =>
        sandbox.app.inject({ url: `/v1/vaults?minTvl=${i + 1}` }),
      );
      while (asked.mock.calls.length < 10) await new Promise((resolve) => setImmediate(resolve));
      // The vaults' summaries and the strategies: one read each, for all ten.
      expect(reads).toHaveBeenCalledTimes(2);
      release();
      const bodies = (await Promise.all(answers)).map((answer) => {
        expect(answer.statusCode, answer.body).toBe(200);
        return answer.json() as Body;
      });
      expect(new Set(bodies.map((body) => body.totalTvl)).size).toBe(1);
      expect(reads).toHaveBeenCalledTimes(2);
    } finally {
      release();
      reads.mockRestore();
      asked.mockRestore();
    }
  });

  it('keep no read that failed: the next request reads again', async () => {
    await commitOnce();
    const { view } = sandbox.runtime.index;
    const reads = vi.spyOn(view, 'read').mockImplementationOnce(async () => {
      throw new IndexUnavailableError('a read failed (test)');
    });
    try {
      const failed = await sandbox.app.inject({ url: '/v1/protocol/stats' });
      expect(failed.statusCode, failed.body).toBe(503);
      expect(failed.json()).toMatchObject({ error: { code: 'INDEX_UNAVAILABLE' } });
      const again = await sandbox.app.inject({ url: '/v1/protocol/stats' });
      expect(again.statusCode, again.body).toBe(200);
    } finally {
      reads.mockRestore();
    }
  });
});
