import { describe, expect, it } from 'vitest';
import { HISTORY_MAX_POINTS, MAX_CLOCK_ADVANCE_SECONDS } from '../../src/api/schemas/index.ts';
import { useChainSandbox } from '../helpers/chain.ts';
import { admin, type TestSandbox } from '../helpers/sandbox.ts';

/**
 * A vault history's bound on points (HISTORY_MAX_POINTS), reached for real: the clock moves
 * decades ahead, so this file has a sandbox of its own.
 */
let sandbox: TestSandbox;
useChainSandbox((started) => {
  sandbox = started;
});

const DAY = 86_400;

// biome-ignore lint/suspicious/noExplicitAny: bodies are checked field by field
type Body = any;

const get = async (url: string) => {
  const response = await sandbox.app.inject({ url });
  return { status: response.statusCode, body: response.json() as Body };
};

/** Moves the sandbox clock (and the chain, with a block) on by `seconds`, in allowed steps. */
async function advance(seconds: number) {
  for (let left = seconds; left > 0; left -= MAX_CLOCK_ADVANCE_SECONDS) {
    const step = Math.min(left, MAX_CLOCK_ADVANCE_SECONDS);
    const response = await admin(sandbox.app, 'POST', '/sandbox/clock/advance', { seconds: step });
    expect(response.statusCode, response.body).toBe(200);
  }
}

/** Daily points from a vault created at `createdAt` to `now`: one per day ended, and now. */
const dailyPoints = (createdAt: number, now: number) =>
  Math.ceil(now / DAY) - Math.floor(createdAt / DAY);

describe('GET /v1/vaults/:address/history and vaultHistory at HISTORY_MAX_POINTS', () => {
  it('answers a history of exactly the bound, and refuses one point more, naming the interval', async () => {
    const address = sandbox.chain.deployment.vaults.conservative;
    const vaults = (await get('/v1/vaults')).body.vaults as Array<{
      address: string;
      createdAt: string;
    }>;
    const createdAt =
      Date.parse(vaults.find((vault) => vault.address === address)?.createdAt ?? '') / 1000;
    // The middle of the day on which the daily history reaches the bound: seconds of drift
    // between here and the block that carries the time change nothing.
    const target = (Math.floor(createdAt / DAY) + HISTORY_MAX_POINTS - 1) * DAY + DAY / 2;
    expect(target).toBeGreaterThan(sandbox.clock.nowSeconds());
    await advance(target - sandbox.clock.nowSeconds());

    const url = `/v1/vaults/${address}/history?period=all&interval=1d`;
    const full = await get(url);
    expect(full.status, JSON.stringify(full.body).slice(0, 300)).toBe(200);
    const now = Date.parse(full.body.points.at(-1).timestamp) / 1000;
    expect(dailyPoints(createdAt, now)).toBe(HISTORY_MAX_POINTS);
    expect(full.body.points).toHaveLength(HISTORY_MAX_POINTS);

    await advance(DAY);
    const over = await get(url);
    expect(over.status).toBe(400);
    expect(over.body.error).toEqual({
      code: 'INVALID_PARAMETER',
      message: `period all at interval 1d is ${HISTORY_MAX_POINTS + 1} points, more than ${HISTORY_MAX_POINTS}; choose a longer interval or a shorter period`,
      details: { parameter: 'interval' },
    });
    // A coarser interval over the same period is answered.
    const weekly = await get(`/v1/vaults/${address}/history?period=all&interval=1w`);
    expect(weekly.status).toBe(200);
    expect(weekly.body.points.length).toBeLessThan(HISTORY_MAX_POINTS);

    const response = await sandbox.app.inject({
      method: 'POST',
      url: '/graphql',
      payload: {
        query: `{ vaultHistory(address: "${address}", period: ALL, interval: DAY) { tvl } }`,
      },
    });
    const body = response.json() as Body;
    expect(body.data).toBeNull();
    expect(body.errors).toHaveLength(1);
    expect(body.errors[0]).toMatchObject({
      message: over.body.error.message,
      extensions: { code: 'BAD_USER_INPUT' },
    });
  }, 60_000);
});
