import { describe, expect, it, vi } from 'vitest';
import { ANSWER_CACHE_LIMITS } from '../../src/sandbox/routes/response-cache.ts';
import { useChainSandbox } from '../helpers/chain.ts';
import type { TestSandbox } from '../helpers/sandbox.ts';

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
