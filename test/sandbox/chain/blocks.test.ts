import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { keccak256 } from 'viem';
import { describe, expect, it, vi } from 'vitest';
import { AgentOnboarding } from '../../../src/sandbox/chain/contracts/artifacts.ts';
import { type ChainReader, call, chainAgent, useChainSandbox } from '../../helpers/chain.ts';
import { admin, type TestSandbox } from '../../helpers/sandbox.ts';

/** Block production as the sandbox does it: its own blocks, logged with the writes' rows. */
let sandbox: TestSandbox;
let reader: ChainReader;
/** Called with each warning the chain logs (a recovery says when it starts and ends). */
let onChainWarning: (message: string) => void = () => {};
const chainWarnings: string[] = [];
useChainSandbox(
  (started, chainReader) => {
    sandbox = started;
    reader = chainReader;
  },
  {
    chainLog: {
      info() {},
      warn(message) {
        chainWarnings.push(message);
        onChainWarning(message);
      },
      error() {},
    },
  },
);

/** Waits until the chain answers again (a rebuild has ended). */
async function chainIsBack() {
  let connected = await sandbox.chain.isConnected();
  for (let i = 0; i < 250 && !connected; i++) {
    await new Promise((resolve) => setTimeout(resolve, 20));
    connected = await sandbox.chain.isConnected();
  }
  expect(connected).toBe(true);
}

/** Chain time and the clock agree: an advance's block carries at least the time asked for. */
async function clockAndChainAgree() {
  // The clock itself may tick on a second by the time the answer is written.
  const asked = sandbox.clock.nowSeconds() + 10;
  const again = await admin(sandbox.app, 'POST', '/sandbox/clock/advance', { seconds: 10 });
  expect(again.statusCode).toBe(200);
  const block = await reader.getBlock();
  expect(Number(block.timestamp)).toBeGreaterThanOrEqual(asked);
  expect(again.json().offset_seconds).toBe(sandbox.clock.offsetSeconds());
}

describe('the block producer', () => {
  it("logs each write's block, raw transactions included, before it answers", async () => {
    const agent = await chainAgent(sandbox);
    const response = await call(sandbox, agent.apiKey, 'POST', '/api/v1/agent/vault/deposit', {
      vault_id: 'hedged',
      amount_usdc: 3,
    });
    expect(response.statusCode).toBe(200);
    const { approve_tx, deposit_tx } = response.json();
    const receipt = await reader.getTransactionReceipt({ hash: deposit_tx });
    const logged = await sandbox.store.chainLog.find(Number(receipt.blockNumber));
    expect(logged?.hash).toBe(receipt.blockHash);
    // Both of the write's transactions were signed at once and mined in one block.
    expect(logged?.txs.map((raw) => keccak256(raw))).toEqual([approve_tx, deposit_tx]);
  });

  it('puts concurrent writes from different agents into shared blocks', async () => {
    const agents = await Promise.all(Array.from({ length: 6 }, () => chainAgent(sandbox)));
    const responses = await Promise.all(
      agents.map((agent) =>
        call(sandbox, agent.apiKey, 'POST', '/api/v1/agent/vault/deposit', {
          vault_id: 'moderate',
          amount_usdc: 1,
        }),
      ),
    );
    const blocks = new Set<bigint>();
    for (const response of responses) {
      expect(response.statusCode).toBe(200);
      blocks.add(
        (await reader.getTransactionReceipt({ hash: response.json().deposit_tx })).blockNumber,
      );
    }
    expect(blocks.size).toBeLessThan(agents.length);
  });

  it('names the decoded reason when a transaction reverts once mined', async () => {
    const before = await reader.getBlockNumber({ cacheTime: 0 });
    // An explicit gas limit skips the estimate, so the revert happens onchain.
    const attempt = sandbox.chain.treasury.exclusive((session) =>
      session.send([
        {
          label: 'onboarding nobody',
          address: sandbox.chain.deployment.agent_onboarding,
          abi: AgentOnboarding.abi,
          functionName: 'onboard',
          args: [[], []],
          value: 1n,
          gas: 200_000n,
        },
      ]),
    );
    await expect(attempt).rejects.toThrow(
      /^onboarding nobody failed onchain: WrongValue\(1, 0\) \(tx 0x[0-9a-f]{64}\)$/,
    );
    // It was mined (and logged), and the treasury's next transaction still goes through.
    expect(await reader.getBlockNumber({ cacheTime: 0 })).toBeGreaterThan(before);
    const agent = await chainAgent(sandbox);
    expect(agent.agentAddress).toMatch(/^0x/);
  });

  it('holds a clock advance that arrives while anvil is rebuilt, then moves both', async () => {
    // An advance first: the treasury then knows its nonce, so the one below reaches the chain
    // only through the block producer, which the rebuild holds. (A wallet that must read its
    // nonce from the chain meanwhile is answered 503 instead: the chain is shut while rebuilt.)
    expect(
      (await admin(sandbox.app, 'POST', '/sandbox/clock/advance', { seconds: 1 })).statusCode,
    ).toBe(200);
    const offsetBefore = sandbox.clock.offsetSeconds();
    const [anvilPid] = readFileSync(join(sandbox.dir, 'anvil.pid'), 'utf8').split(' ').map(Number);
    // The advance is sent the moment the recovery has begun (it holds the chain then).
    const advance = new Promise<Awaited<ReturnType<typeof admin>>>((resolve) => {
      onChainWarning = (message) => {
        if (!message.startsWith('anvil exited')) return;
        onChainWarning = () => {};
        resolve(admin(sandbox.app, 'POST', '/sandbox/clock/advance', { seconds: 500 }));
      };
    });
    process.kill(anvilPid as number, 'SIGKILL');
    const answered = await advance;
    expect(answered.statusCode).toBe(200);
    expect(sandbox.clock.offsetSeconds()).toBe(offsetBefore + 500);
    expect(answered.json().offset_seconds).toBe(offsetBefore + 500);
    expect(chainWarnings.some((line) => /^the chain is back at block \d+$/.test(line))).toBe(true);
    await chainIsBack();
    await clockAndChainAgree();
  });

  it('moves neither the clock nor the chain when the advance’s block cannot be logged', async () => {
    const offsetBefore = sandbox.clock.offsetSeconds();
    // The fault: sandbox.db refuses the commit of the block that carries the new time. The
    // block is mined but never logged; the chain is rebuilt from the log, without it.
    const commitBlocks = sandbox.store.commitBlocks.bind(sandbox.store);
    let refused = 0;
    const spy = vi.spyOn(sandbox.store, 'commitBlocks').mockImplementation((blocks, records) => {
      if (blocks.length > 0 && refused === 0) {
        refused++;
        throw new Error('disk I/O error');
      }
      return commitBlocks(blocks, records);
    });
    const advance = await admin(sandbox.app, 'POST', '/sandbox/clock/advance', { seconds: 500 });
    spy.mockRestore();
    expect(refused).toBe(1);
    expect(advance.statusCode).toBe(503);
    expect(sandbox.clock.offsetSeconds()).toBe(offsetBefore);
    expect((await sandbox.store.meta.get('clock_offset_seconds')) ?? '0').toBe(
      String(offsetBefore),
    );
    await chainIsBack();
    // The chain is back at the log's head: the block with the new time is gone.
    const head = await reader.getBlock({ blockTag: 'latest' });
    expect(Number(head.timestamp)).toBeLessThanOrEqual(sandbox.clock.nowSeconds() + 1);
    await clockAndChainAgree();
  });

  it('adds up concurrent clock advances', async () => {
    const before = sandbox.clock.offsetSeconds();
    const responses = await Promise.all(
      [100, 200, 300].map((seconds) =>
        admin(sandbox.app, 'POST', '/sandbox/clock/advance', { seconds }),
      ),
    );
    expect(responses.map((response) => response.statusCode)).toEqual([200, 200, 200]);
    expect(sandbox.clock.offsetSeconds()).toBe(before + 600);
    expect(await sandbox.store.meta.get('clock_offset_seconds')).toBe(String(before + 600));
  });
});
