import { createHash, randomUUID } from 'node:crypto';
import type { LightMyRequestResponse } from 'fastify';
import { type Address, erc20Abi } from 'viem';
import { describe, expect, it } from 'vitest';
import { type ChainReader, chainAgent, useChainSandbox } from '../helpers/chain.ts';
import {
  getNonce,
  keyedWrite,
  newAccount,
  postRegister,
  signedBody,
  storedText,
  type TestSandbox,
} from '../helpers/sandbox.ts';

/**
 * Idempotency-Key on a real sandbox (app, SQLite or PostgreSQL, anvil): a keyed write runs once, whatever
 * is sent again, and its repeats get its first answer byte for byte.
 */
let sandbox: TestSandbox;
let reader: ChainReader;
useChainSandbox((started, chainReader) => {
  sandbox = started;
  reader = chainReader;
});

const keyed = (
  key: string,
  url: string,
  payload: object | undefined,
  auth: { apiKey?: string; admin?: boolean },
) => keyedWrite(sandbox.app, key, url, payload, auth);

const deposit = (apiKey: string, key: string, amount: number) =>
  keyed(
    key,
    '/api/v1/agent/vault/deposit',
    { vault_id: 'moderate', amount_usdc: amount },
    { apiKey },
  );

const usdcOf = (address: Address) =>
  reader.readContract({
    address: sandbox.chain.deployment.usdc,
    abi: erc20Abi,
    functionName: 'balanceOf',
    args: [address],
  });

/** The transactions the agent's wallet has sent, by its nonce on the chain. */
const sentBy = (address: Address) => reader.getTransactionCount({ address });

describe('a keyed deposit', () => {
  it('sent twice moves funds once; the repeat is the first answer, byte for byte, marked replayed', async () => {
    const agent = await chainAgent(sandbox);
    const before = await usdcOf(agent.agentAddress);
    const key = randomUUID();
    const first = await deposit(agent.apiKey, key, 12.5);
    expect(first.statusCode).toBe(200);
    expect(first.headers['idempotent-replayed']).toBe('false');
    const second = await deposit(agent.apiKey, key, 12.5);
    expect(second.statusCode).toBe(200);
    expect(second.headers['idempotent-replayed']).toBe('true');
    expect(second.body).toBe(first.body);
    expect(before - (await usdcOf(agent.agentAddress))).toBe(12_500_000n);
  });

  it('sent 20 times at once runs once: every other answer is the replay or a 409', async () => {
    const agent = await chainAgent(sandbox);
    const nonce = await sentBy(agent.agentAddress);
    const key = randomUUID();
    const answers = await Promise.all(
      Array.from({ length: 20 }, () => deposit(agent.apiKey, key, 3)),
    );
    const ran = answers.filter((a) => a.headers['idempotent-replayed'] === 'false');
    expect(ran).toHaveLength(1);
    const first = ran[0] as LightMyRequestResponse;
    expect(first.statusCode).toBe(200);
    for (const answer of answers) {
      if (answer === first) continue;
      if (answer.statusCode === 409) {
        expect(answer.headers['retry-after']).toBe('1');
        expect(answer.headers['idempotent-replayed']).toBeUndefined();
      } else {
        expect(answer.headers['idempotent-replayed']).toBe('true');
        expect(answer.body).toBe(first.body);
      }
    }
    // One approve and one deposit: the write ran once.
    expect((await sentBy(agent.agentAddress)) - nonce).toBe(2);
    const again = await deposit(agent.apiKey, key, 3);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.body).toBe(first.body);
  });

  it('refuses the same key with another body or route (422), running nothing', async () => {
    const agent = await chainAgent(sandbox);
    const key = randomUUID();
    expect((await deposit(agent.apiKey, key, 1)).statusCode).toBe(200);
    const nonce = await sentBy(agent.agentAddress);
    const other = await deposit(agent.apiKey, key, 2);
    expect(other.statusCode).toBe(422);
    expect(other.json().error).toMatch(/Idempotency-Key/);
    const route = await keyed(
      key,
      '/api/v1/agent/strategy/submit',
      { name: 'Keyed', description: 'a strategy' },
      { apiKey: agent.apiKey },
    );
    expect(route.statusCode).toBe(422);
    expect(await sentBy(agent.agentAddress)).toBe(nonce);
  });

  it("keeps one agent's key apart from the same string of another agent", async () => {
    const [a, b] = await Promise.all([chainAgent(sandbox), chainAgent(sandbox)]);
    const key = 'ci-run-7-step-deposit';
    const first = await deposit(a.apiKey, key, 4);
    const second = await deposit(b.apiKey, key, 4);
    expect(first.statusCode).toBe(200);
    expect(second.statusCode).toBe(200);
    expect(second.headers['idempotent-replayed']).toBe('false');
    expect(second.json().agent_address).toBe(b.agentAddress);
    expect(first.json().deposit_tx).not.toBe(second.json().deposit_tx);
  });

  it('stores the 4xx of a write that ran, and nothing for one refused before it ran', async () => {
    const agent = await chainAgent(sandbox);
    const key = randomUUID();
    // More than the wallet holds: refused by the handler, after it began.
    const refused = await deposit(agent.apiKey, key, 1_000_000);
    expect(refused.statusCode).toBe(400);
    expect(refused.headers['idempotent-replayed']).toBe('false');
    const replayed = await deposit(agent.apiKey, key, 1_000_000);
    expect(replayed.headers['idempotent-replayed']).toBe('true');
    expect(replayed.body).toBe(refused.body);

    // A bad field is refused before anything runs: the key stays free.
    const unread = randomUUID();
    const invalid = await keyed(
      unread,
      '/api/v1/agent/vault/deposit',
      { vault_id: 'nope', amount_usdc: 1 },
      { apiKey: agent.apiKey },
    );
    expect(invalid.statusCode).toBe(400);
    expect(invalid.headers['idempotent-replayed']).toBeUndefined();
    expect((await deposit(agent.apiKey, unread, 1)).statusCode).toBe(200);

    // So is a request without a valid API key.
    const anonymous = randomUUID();
    const unauthorized = await deposit('not-a-key', anonymous, 1);
    expect(unauthorized.statusCode).toBe(401);
    expect((await deposit(agent.apiKey, anonymous, 1)).headers['idempotent-replayed']).toBe(
      'false',
    );
  });

  it.each([
    ['', 'empty'],
    ['x'.repeat(256), 'longer than 255'],
    ['caf\u00e9', 'not ASCII'],
    ['tab\there', 'a control character'],
  ])('refuses a key that is %j (%s) with 400 before running', async (key) => {
    const agent = await chainAgent(sandbox);
    const nonce = await sentBy(agent.agentAddress);
    const answer = await deposit(agent.apiKey, key, 1);
    expect(answer.statusCode).toBe(400);
    expect(answer.json().error).toMatch(/idempotency-key/i);
    expect(await sentBy(agent.agentAddress)).toBe(nonce);
  });

  it('takes a key of 255 printable characters', async () => {
    const agent = await chainAgent(sandbox);
    const key = `${' ~'.repeat(127)}!`;
    const first = await deposit(agent.apiKey, key, 1);
    expect(first.statusCode).toBe(200);
    expect((await deposit(agent.apiKey, key, 1)).headers['idempotent-replayed']).toBe('true');
  });

  it('is not expired by sandbox clock advances', async () => {
    const agent = await chainAgent(sandbox);
    const key = randomUUID();
    const first = await deposit(agent.apiKey, key, 2);
    for (let i = 0; i < 3; i++) {
      const advanced = await keyed(
        randomUUID(),
        '/sandbox/clock/advance',
        { seconds: 2 * 86_400 },
        {
          admin: true,
        },
      );
      expect(advanced.statusCode).toBe(200);
    }
    const again = await deposit(agent.apiKey, key, 2);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.body).toBe(first.body);
  });

  it('leaves unkeyed writes as they were: no Idempotent-Replayed header', async () => {
    const agent = await chainAgent(sandbox);
    const answer = await sandbox.app.inject({
      method: 'POST',
      url: '/api/v1/agent/vault/deposit',
      headers: { 'x-api-key': agent.apiKey },
      payload: { vault_id: 'moderate', amount_usdc: 1 },
    });
    expect(answer.statusCode).toBe(200);
    expect(answer.headers['idempotent-replayed']).toBeUndefined();
  });
});

describe('the answers a key keeps', () => {
  it("keeps a handler's 409 (a second vote): final, replayed as it was", async () => {
    const agent = await chainAgent(sandbox, 'established');
    const proposal = await keyed(
      randomUUID(),
      '/sandbox/proposals',
      { title: 'Keyed vote', description: 'one vote each' },
      { admin: true },
    );
    const vote = { proposal_id: proposal.json().proposal_id, support: 1, reason: 'once' };
    const url = '/api/v1/agent/governance/vote';
    expect((await keyed(randomUUID(), url, vote, { apiKey: agent.apiKey })).statusCode).toBe(200);
    const key = randomUUID();
    const second = await keyed(key, url, vote, { apiKey: agent.apiKey });
    expect(second.statusCode).toBe(409);
    expect(second.headers['idempotent-replayed']).toBe('false');
    const again = await keyed(key, url, vote, { apiKey: agent.apiKey });
    expect(again.statusCode).toBe(409);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.body).toBe(second.body);
  });

  it("does not keep the faucet's cooldown: the same key drips once the cooldown is over", async () => {
    const agent = await chainAgent(sandbox);
    const url = '/api/v1/agent/faucet';
    expect((await keyed(randomUUID(), url, undefined, { apiKey: agent.apiKey })).statusCode).toBe(
      200,
    );
    const key = randomUUID();
    const cooling = await keyed(key, url, undefined, { apiKey: agent.apiKey });
    expect(cooling.statusCode).toBe(429);
    expect(cooling.headers['idempotent-replayed']).toBe('false');
    const advanced = await keyed(
      randomUUID(),
      '/sandbox/clock/advance',
      { seconds: 86_400 },
      {
        admin: true,
      },
    );
    expect(advanced.statusCode).toBe(200);
    const dripped = await keyed(key, url, undefined, { apiKey: agent.apiKey });
    expect(dripped.statusCode).toBe(200);
    expect(dripped.headers['idempotent-replayed']).toBe('false');
  });
});

describe('a keyed registration', () => {
  it("is the wallet's: replayed with the same API key, never registered twice", async () => {
    const account = newAccount();
    const { nonce, message } = await getNonce(sandbox.app, account.address);
    const body = await signedBody({ wallet: account.address, nonce, message, signer: account });
    const key = randomUUID();
    const send = () =>
      sandbox.app.inject({
        method: 'POST',
        url: '/api/v1/agent/auth/register',
        headers: { 'idempotency-key': key },
        payload: body,
      });
    const first = await send();
    expect(first.statusCode).toBe(200);
    const second = await send();
    expect(second.headers['idempotent-replayed']).toBe('true');
    expect(second.body).toBe(first.body);
    // Unkeyed, the same body is refused: the nonce is used.
    expect((await postRegister(sandbox.app, body)).statusCode).not.toBe(200);
    // The stored answer holds the API key, which is stored only as a hash: not in the clear.
    const apiKey = first.json().api_key as string;
    const stored = await storedText(sandbox);
    expect(stored).toContain(createHash('sha256').update(apiKey).digest('hex'));
    expect(stored).not.toContain(apiKey);
    expect(stored).not.toContain(key);
  });
});

describe('keyed admin writes', () => {
  it('fund, proposals, strategy status, fulfilment delay, nodes, tier and clock each run once', async () => {
    const agent = await chainAgent(sandbox);
    const strategy = await keyed(
      randomUUID(),
      '/api/v1/agent/strategy/submit',
      { name: 'Keyed status', description: 'moved once' },
      { apiKey: agent.apiKey },
    );
    expect(strategy.statusCode, strategy.body).toBe(200);
    const writes: Array<[string, object]> = [
      [
        '/sandbox/strategies/status',
        { strategy_id: strategy.json().strategy_id, status: 'paused' },
      ],
      ['/sandbox/fund', { address: agent.agentAddress, usdc: 5 }],
      ['/sandbox/proposals', { title: 'Keyed', description: 'once' }],
      ['/sandbox/vaults/fulfillment-delay', { vault_id: 'configurable', seconds: 60 }],
      ['/sandbox/nodes', { name: 'keyed-node', operator_address: agent.agentAddress }],
      ['/sandbox/agents/tier', { wallet_address: agent.account.address, tier: 'established' }],
      ['/sandbox/clock/advance', { seconds: 60 }],
    ];
    for (const [url, payload] of writes) {
      const key = randomUUID();
      const first = await keyed(key, url, payload, { admin: true });
      expect(first.statusCode, `${url}: ${first.body}`).toBe(200);
      expect(first.headers['idempotent-replayed']).toBe('false');
      const second = await keyed(key, url, payload, { admin: true });
      expect(second.headers['idempotent-replayed'], url).toBe('true');
      expect(second.body, url).toBe(first.body);
    }
  });

  it('snapshot and restore: a restore brings back the keys of the restored state, and keeps its own', async () => {
    const agent = await chainAgent(sandbox);
    const before = randomUUID();
    const kept = await deposit(agent.apiKey, before, 1);
    const name = `keys-${randomUUID().slice(0, 8)}`;
    const snapshotKey = randomUUID();
    const taken = await keyed(snapshotKey, '/sandbox/snapshots', { name }, { admin: true });
    expect(taken.statusCode, taken.body).toBe(200);
    const retaken = await keyed(snapshotKey, '/sandbox/snapshots', { name }, { admin: true });
    expect(retaken.headers['idempotent-replayed']).toBe('true');
    expect(retaken.body).toBe(taken.body);

    const after = randomUUID();
    const lost = await deposit(agent.apiKey, after, 2);
    expect(lost.statusCode).toBe(200);

    const restoreKey = randomUUID();
    const url = `/sandbox/snapshots/${name}/restore`;
    const restored = await keyed(restoreKey, url, undefined, { admin: true });
    expect(restored.statusCode, restored.body).toBe(200);
    // The restore's own answer is kept in the restored state: a retry does not restore again.
    const again = await keyed(restoreKey, url, undefined, { admin: true });
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.body).toBe(restored.body);

    // A key of the restored state is back; one made after the snapshot is gone with its deposit.
    const replay = await deposit(agent.apiKey, before, 1);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.body).toBe(kept.body);
    const rerun = await deposit(agent.apiKey, after, 2);
    expect(rerun.statusCode).toBe(200);
    expect(rerun.headers['idempotent-replayed']).toBe('false');
  });
});
