import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Hex } from 'viem';
import { describe, expect, it } from 'vitest';
import { type Answer, keyedWrites } from '../helpers/keyed-writes.ts';
import { rpcCall, type ServeProcess, until, useServes } from '../helpers/serve.ts';

/**
 * Idempotency-Key through kill -9 (issue 24 §3), on real serves and a real anvil: a keyed
 * deposit whose process dies after its commit, or in the middle of a burst, or whose anvil
 * dies, is one deposit on the chain once every key has been retried, never two and never
 * none. The chain is read over JSON-RPC, not through the sandbox's own answers.
 */
const TOKEN = 'idempotency-test-admin';
const serves = useServes('serve-idempotency', TOKEN);
const serve = (env: NodeJS.ProcessEnv = {}) => serves.stateServe(env);

/** Waits for a serve killed with kill -9 (by itself or by the test) to be gone. */
async function killed(serve: ServeProcess) {
  expect(await serve.exited).toBe('SIGKILL');
  serves.forget(serve);
}

const {
  keyedDeposit,
  fundedAgent,
  rpcUrlOf,
  sentBy,
  depositedBy,
  burstOf,
  sendBurst,
  expectOnceEach,
} = keyedWrites(TOKEN);

describe('a keyed deposit through kill -9', () => {
  it('committed just before serve died, unanswered: a retry with its key after restart gets the stored answer, and the chain holds one deposit', async () => {
    // The first commit of writes is the agent's onboarding; the second, its deposit.
    const first = await serve({ AGENTCTL_SANDBOX_FAULT: 'crash-after-commit:2' });
    const agent = await fundedAgent(first.url);
    expect(await sentBy(await rpcUrlOf(first.url), agent.address)).toBe(0);
    const key = randomUUID();
    const lost = await keyedDeposit(first.url, agent.apiKey, key, 7).catch(() => undefined);
    expect(lost).toBeUndefined();
    await killed(first);

    const second = await serve();
    const rpcUrl = await rpcUrlOf(second.url);
    // Its commit landed: the deposit is on the chain already, before any retry.
    expect(await sentBy(rpcUrl, agent.address)).toBe(2);
    const retried = await keyedDeposit(second.url, agent.apiKey, key, 7);
    expect(retried.status).toBe(200);
    expect(retried.replayed).toBe('true');
    const { deposit_tx } = JSON.parse(retried.text) as { deposit_tx: Hex };
    expect(await depositedBy(rpcUrl, deposit_tx, agent.address)).toBe(7_000_000n);
    expect(await sentBy(rpcUrl, agent.address)).toBe(2);
  });

  it('killed in the middle of a burst: every key retried after restart is one deposit on the chain, and every answer given replays byte for byte', async () => {
    // kill -9 at a commit of the burst's, not from outside: an outside kill lands between a
    // commit and its answers only now and then (the window is an fsync long), and the test
    // must see writes that were committed and never answered. Each agent is onboarded alone
    // (a commit of writes each); each agent's deposits are mined one block after another (its
    // wallet sends one at a time), so the burst takes six blocks at least, and the fifth of
    // them is committed with the burst under way: some answered, some in that block and
    // unanswered, the rest (every agent's sixth, at least) not mined.
    const agents = 5;
    const first = await serve({ AGENTCTL_SANDBOX_FAULT: `crash-after-commit:${agents + 5}` });
    const writes = await burstOf(first.url, agents, 6);
    const before = await sendBurst(first.url, writes);
    await killed(first);
    expect(before.size).toBeLessThan(writes.length);
    for (const answer of before.values()) {
      expect(answer.status).toBe(200);
      expect(answer.replayed).toBe('false');
    }

    const second = await serve();
    const after = new Map<string, Answer>();
    await Promise.all(
      writes.map(async (write) => {
        after.set(write.key, await keyedDeposit(second.url, write.apiKey, write.key, write.amount));
      }),
    );
    for (const [key, answer] of before) {
      expect(after.get(key)).toEqual({ ...answer, replayed: 'true' });
    }
    // The crash's block: committed, never answered, answered now from what was stored.
    const unanswered = writes.filter((write) => !before.has(write.key));
    expect(unanswered.some((write) => after.get(write.key)?.replayed === 'true')).toBe(true);
    await expectOnceEach(await rpcUrlOf(second.url), writes, after);
  });

  it('with anvil killed in the middle of a burst: every key retried until answered is one deposit on the chain', async () => {
    const sandbox = await serve();
    const writes = await burstOf(sandbox.url, 4, 6);
    const anvilPid = Number(
      readFileSync(join(serves.anvilDir(sandbox), 'anvil.pid'), 'utf8').split(' ')[0],
    );
    const before = await sendBurst(sandbox.url, writes, {
      answers: 8,
      kill: () => process.kill(anvilPid, 'SIGKILL'),
    });
    expect(before.size).toBeGreaterThanOrEqual(8);

    // A write anvil's death interrupted says so (503), or is answered once the chain is back
    // (its standby takes over); a retry runs it, or replays it if it had been committed.
    const final = new Map<string, Answer>();
    await Promise.all(
      writes.map(async (write) => {
        await until(async () => {
          const answer = await keyedDeposit(sandbox.url, write.apiKey, write.key, write.amount);
          if (answer.status === 409 || answer.status === 503) return false;
          final.set(write.key, answer);
          return true;
        });
      }),
    );
    for (const [key, answer] of before) {
      expect([200, 503]).toContain(answer.status);
      if (answer.status !== 200) continue;
      expect(final.get(key)).toEqual({ ...answer, replayed: 'true' });
    }
    await expectOnceEach(await rpcUrlOf(sandbox.url), writes, final);
  });
});

describe('a keyed restore through kill -9', () => {
  /** A restore with an Idempotency-Key and the admin token; the answer as it came. */
  async function keyedRestore(url: string, name: string, key: string): Promise<Answer> {
    const response = await fetch(`${url}/sandbox/snapshots/${name}/restore`, {
      method: 'POST',
      headers: { 'x-admin-token': TOKEN, 'idempotency-key': key },
    });
    return {
      status: response.status,
      text: await response.text(),
      replayed: response.headers.get('idempotent-replayed'),
    };
  }

  it('done, then killed before its answer: a retry with its key after restart is answered, and undoes nothing written since', async () => {
    const first = await serve({ AGENTCTL_SANDBOX_FAULT: 'crash-after-restore' });
    const agent = await fundedAgent(first.url);
    const base = await serves.request(first.url, 'POST', '/sandbox/snapshots', { name: 'base' });
    expect(base.status).toBe(200);
    expect((await keyedDeposit(first.url, agent.apiKey, randomUUID(), 2)).status).toBe(200);
    const key = randomUUID();
    await expect(keyedRestore(first.url, 'base', key)).rejects.toThrow();
    await killed(first);

    // The restore was done: the chain is the snapshot's, the deposit after it gone.
    const second = await serve();
    const rpcUrl = await rpcUrlOf(second.url);
    expect(Number(await rpcCall(rpcUrl, 'eth_blockNumber'))).toBe(base.body.block_number);
    expect(await sentBy(rpcUrl, agent.address)).toBe(0);
    // A write made since, then the restore retried with its key: answered from what was
    // stored with the restore's rows, and the write stays.
    const since = await keyedDeposit(second.url, agent.apiKey, randomUUID(), 3);
    expect(since.status).toBe(200);
    const retried = await keyedRestore(second.url, 'base', key);
    expect(retried.status).toBe(200);
    expect(retried.replayed).toBe('true');
    expect(JSON.parse(retried.text)).toMatchObject({
      name: 'base',
      block_number: base.body.block_number,
    });
    const { deposit_tx } = JSON.parse(since.text) as { deposit_tx: Hex };
    expect(await depositedBy(rpcUrl, deposit_tx, agent.address)).toBe(3_000_000n);
    expect(await sentBy(rpcUrl, agent.address)).toBe(2);
  });
});
