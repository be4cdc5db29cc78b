import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { formatUnits, type Hex, parseEther, parseUnits } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { describe, expect, it } from 'vitest';
import { CHAIN_ID } from '../../src/api/schemas/index.ts';
import { testBackend } from '../helpers/postgres.ts';
import {
  depositOver,
  registerOver,
  requestOver,
  rpcCall,
  until,
  useServes,
} from '../helpers/serve.ts';

/**
 * The chain under serve from outside: a third party on the RPC URL (anvil_reorg, anvil_mine,
 * automine) and kill -9 of serve or of anvil. Acknowledged writes survive every one of them,
 * and nothing is answered from a chain that is only partly rebuilt.
 */
const TOKEN = 'recovery-test-admin';
const serves = useServes('serve-recovery', TOKEN);
/** serve on the test's state dir; AGENTCTL_CHECKPOINTS=manual keeps every block in the log. */
const serve = (env: NodeJS.ProcessEnv = {}) =>
  serves.stateServe({ AGENTCTL_CHECKPOINTS: 'manual', ...env });

const request = (url: string, method: string, path: string, body?: object, key?: string) =>
  requestOver(url, TOKEN, method, path, body, key);

async function rpcUrlOf(url: string): Promise<string> {
  return (await request(url, 'GET', '/sandbox/info')).body.rpc_url;
}

const deposit = depositOver;

async function receipt(rpcUrl: string, hash: Hex) {
  return (await rpcCall(rpcUrl, 'eth_getTransactionReceipt', [hash])) as {
    status: Hex;
  } | null;
}

/** A transaction from a third party's own funded account, signed for the sandbox chain. */
async function thirdPartyTransfer(rpcUrl: string, nonce = 0) {
  const account = privateKeyToAccount(generatePrivateKey());
  await rpcCall(rpcUrl, 'anvil_setBalance', [account.address, `0x${parseEther('1').toString(16)}`]);
  return account.signTransaction({
    chainId: CHAIN_ID,
    nonce,
    to: '0x000000000000000000000000000000000000dEaD',
    value: 1n,
    gas: 21_000n,
    maxFeePerGas: 10n ** 10n,
    maxPriorityFeePerGas: 0n,
    type: 'eip1559',
  });
}

describe('a chain no one else can stall', () => {
  it('notices a chain replaced at the same height (anvil_reorg) and rebuilds it from the log', async () => {
    const sandbox = await serve();
    const { apiKey } = await registerOver(sandbox.url);
    const rpcUrl = await rpcUrlOf(sandbox.url);
    const made = await deposit(sandbox.url, apiKey, 50);

    // The deposit's block and the one before are replaced by empty blocks: the same height.
    // (serve may notice before anvil answers: the rebuild then drops this connection.)
    await rpcCall(rpcUrl, 'anvil_reorg', [2, []]).catch(() => undefined);

    await until(async () => (await receipt(rpcUrl, made.deposit_tx))?.status === '0x1');
    // (Its log lines may reach us after the RPC URL's answer.) The rebuild is done, the index
    // back on the rebuilt chain, once it says the chain is back: until then the index may
    // still follow the replaced chain, which has no deposit.
    await until(async () => sandbox.stderr().includes('the chain was replaced'));
    await until(async () => sandbox.stderr().includes('the chain is back'));
    const partA = await request(
      sandbox.url,
      'GET',
      '/api/v1/agent/vault/positions',
      undefined,
      apiKey,
    );
    expect(partA.status).toBe(200);
    expect(partA.body.positions).toMatchObject([
      { vault_id: 'moderate', shares: formatUnits(BigInt(made.shares_balance), 6) },
    ]);
    const v1 = await request(sandbox.url, 'GET', `/v1/users/${made.agent_address}/positions`);
    expect(v1.status).toBe(200);
    expect(JSON.stringify(v1.body)).toContain(made.shares_balance);
  });

  it('logs blocks others mine during a checkpoint, and automined ones, instead of rebuilding', async () => {
    const sandbox = await serve();
    const { apiKey } = await registerOver(sandbox.url);
    const rpcUrl = await rpcUrlOf(sandbox.url);
    const first = await deposit(sandbox.url, apiKey, 5);

    // (Funded with a cheat method, which only a checkpoint keeps.)
    const signed = await thirdPartyTransfer(rpcUrl);
    // Blocks mined over the RPC URL just before a checkpoint are part of the chain it takes.
    const head = Number(await rpcCall(rpcUrl, 'eth_blockNumber'));
    await rpcCall(rpcUrl, 'anvil_mine', ['0x20']);
    const checkpoint = await request(sandbox.url, 'POST', '/sandbox/checkpoint');
    expect(checkpoint.status).toBe(200);
    expect(checkpoint.body.block_number).toBeGreaterThanOrEqual(head + 32);

    // A third party turns automine on with a block time of its own and sends a transaction:
    // its block is logged, and automine is turned off again (the sandbox mines the blocks).
    await rpcCall(rpcUrl, 'anvil_setAutomine', [true]);
    const latest = (await rpcCall(rpcUrl, 'eth_getBlockByNumber', ['latest', false])) as {
      timestamp: Hex;
    };
    await rpcCall(rpcUrl, 'evm_setNextBlockTimestamp', [Number(latest.timestamp) + 100]);
    const theirs = (await rpcCall(rpcUrl, 'eth_sendRawTransaction', [signed])) as Hex;
    await until(async () => (await rpcCall(rpcUrl, 'anvil_getAutomine')) === false);
    // (Its log line may reach us after the RPC URL's answer.)
    await until(() => sandbox.stderr().includes('automine was turned on over the RPC URL'));
    const second = await deposit(sandbox.url, apiKey, 6);
    const third = await deposit(sandbox.url, apiKey, 7);
    expect(sandbox.stderr()).not.toContain('rebuilding the chain');

    // Every block of theirs was logged: a rebuild (anvil killed) brings all of them back.
    const before = Number(await rpcCall(rpcUrl, 'eth_blockNumber'));
    const [anvilPid] = readFileSync(join(serves.anvilDir(sandbox), 'anvil.pid'), 'utf8')
      .split(' ')
      .map(Number);
    process.kill(anvilPid as number, 'SIGKILL');
    await until(async () => sandbox.stderr().includes('the chain is back'));
    expect(Number(await rpcCall(rpcUrl, 'eth_blockNumber'))).toBeGreaterThanOrEqual(before);
    expect(sandbox.stderr()).not.toContain('recovering the chain failed');
    for (const hash of [first.deposit_tx, theirs, second.deposit_tx, third.deposit_tx]) {
      expect((await receipt(rpcUrl, hash))?.status).toBe('0x1');
    }
  });

  it('answers 503, never a partly rebuilt chain, while anvil is rebuilt (its standby killed too); every acknowledged deposit is there before the RPC URL answers', async () => {
    const sandbox = await serve();
    const { apiKey } = await registerOver(sandbox.url);
    const rpcUrl = await rpcUrlOf(sandbox.url);
    // A long log to replay (no checkpoint: AGENTCTL_CHECKPOINTS=manual), the deposits at its end.
    await rpcCall(rpcUrl, 'anvil_mine', ['0x190']);
    const mined = Number(await rpcCall(rpcUrl, 'eth_blockNumber'));
    await until(
      async () =>
        (await request(sandbox.url, 'GET', '/sandbox/info')).body.index.block_number >= mined,
    );
    const deposits: Array<Awaited<ReturnType<typeof deposit>>> = [];
    for (const amount of [11, 12, 13]) deposits.push(await deposit(sandbox.url, apiKey, amount));
    const shares = formatUnits(
      BigInt((deposits.at(-1) as { shares_balance: string }).shares_balance),
      6,
    );

    // Without a standby to take over (killed at the same moment; the next starts a second
    // later), the chain is rebuilt: the log's 400 blocks replayed onto the checkpoint.
    await until(
      async () =>
        (await request(sandbox.url, 'GET', '/sandbox/info')).body.standby.status === 'following',
    );
    const [anvilPid, standbyPid] = ['anvil.pid', 'anvil-standby.pid'].map((file) =>
      Number(readFileSync(join(serves.anvilDir(sandbox), file), 'utf8').split(' ')[0]),
    );
    process.kill(standbyPid as number, 'SIGKILL');
    process.kill(anvilPid as number, 'SIGKILL');

    const seen = { rpc: 0, positions: 0, unavailable: 0, writes: 0 };
    let back = false;
    /** Runs `watch` until the chain is back; a failed expectation stops every watcher. */
    const watching = async (watch: () => Promise<void>) => {
      try {
        while (!back) {
          await watch();
          await new Promise((resolve) => setTimeout(resolve, 5));
        }
      } catch (error) {
        back = true;
        throw error;
      }
    };
    const watchRpc = () =>
      watching(async () => {
        const found = await Promise.all(
          deposits.map((made) =>
            receipt(rpcUrl, made.deposit_tx).then(
              (r) => r?.status,
              () => 'down',
            ),
          ),
        );
        if (found.includes('down')) return;
        // The RPC URL answered: from the whole rebuilt chain.
        expect(found).toEqual(['0x1', '0x1', '0x1']);
        seen.rpc++;
        back = true;
      });
    const watchPartA = () =>
      watching(async () => {
        const answer = await request(
          sandbox.url,
          'GET',
          '/api/v1/agent/vault/positions',
          undefined,
          apiKey,
        );
        if (answer.status === 503) seen.unavailable++;
        else {
          expect(answer.status).toBe(200);
          expect(answer.body.positions).toMatchObject([{ vault_id: 'moderate' }]);
          // At least the shares acknowledged before the kill: more once the write below,
          // sent at the kill, is mined (which may be before this watcher sees the chain back).
          const held = answer.body.positions[0].shares as string;
          expect(parseUnits(held, 6)).toBeGreaterThanOrEqual(parseUnits(shares, 6));
          seen.positions++;
        }
      });
    const write = async () => {
      // A write during the rebuild waits for it (or is refused with 503), never fails otherwise.
      const answer = await request(
        sandbox.url,
        'POST',
        '/api/v1/agent/vault/deposit',
        { vault_id: 'moderate', amount_usdc: 1 },
        apiKey,
      );
      expect([200, 503]).toContain(answer.status);
      if (answer.status === 200) {
        expect((await receipt(rpcUrl, answer.body.deposit_tx))?.status).toBe('0x1');
        seen.writes++;
      }
    };
    await Promise.all([watchRpc(), watchPartA(), write()]);
    expect(seen.rpc).toBe(1);
    // Part A was asked while the chain was being rebuilt. Positions come from the index (what
    // the chain's events said, up to the last indexed block), so each answer was either 503 or
    // every acknowledged deposit (checked above), never a partly rebuilt chain's.
    expect(seen.positions + seen.unavailable).toBeGreaterThan(0);
    await until(async () => (await request(sandbox.url, 'GET', '/health')).body.status === 'ok');
    await until(() => sandbox.stderr().includes('the chain is back'));
    expect(sandbox.stderr()).toContain('restarting anvil and rebuilding the chain');
  });
});

describe('kill -9 of serve', () => {
  it('goes on from the log, without the blocks and transactions the log never held (taking over the anvil left running, on a state dir)', async () => {
    const first = await serve();
    const { apiKey } = await registerOver(first.url);
    const made = await deposit(first.url, apiKey, 21);
    const [anvilPid, , port] = readFileSync(join(serves.anvilDir(first), 'anvil.pid'), 'utf8')
      .split(' ')
      .map(Number);
    first.child.kill('SIGKILL');
    await first.exited;
    serves.forget(first);

    // What no serve acknowledged: a block mined after the last logged one, and a transaction
    // waiting in the pool.
    const direct = `http://127.0.0.1:${port}`;
    const logged = (await rpcCall(direct, 'eth_getBlockByNumber', ['latest', false])) as {
      number: Hex;
      hash: Hex;
    };
    const mined = (await rpcCall(direct, 'eth_sendRawTransaction', [
      await thirdPartyTransfer(direct),
    ])) as Hex;
    await rpcCall(direct, 'evm_mine');
    await rpcCall(direct, 'eth_sendRawTransaction', [await thirdPartyTransfer(direct)]);

    const second = await serve();
    const secondAnvil = Number(
      readFileSync(join(serves.anvilDir(second), 'anvil.pid'), 'utf8').split(' ')[0],
    );
    if (testBackend() === 'sqlite') {
      expect(secondAnvil).toBe(anvilPid);
      expect(second.stderr()).toContain(
        'dropped 1 block(s) anvil had mined after the last logged one',
      );
    } else {
      // A writer on a database has a work dir of its own, perhaps on another host: it starts
      // an anvil of its own from the checkpoint and the log, and leaves the other alone.
      expect(secondAnvil).not.toBe(anvilPid);
    }
    const rpcUrl = await rpcUrlOf(second.url);
    const head = (await rpcCall(rpcUrl, 'eth_getBlockByNumber', [logged.number, false])) as {
      hash: Hex;
    };
    expect(head.hash).toBe(logged.hash);
    expect(await receipt(rpcUrl, mined)).toBeNull();
    expect((await rpcCall(rpcUrl, 'txpool_status')) as { pending: Hex }).toMatchObject({
      pending: '0x0',
    });
    expect((await receipt(rpcUrl, made.deposit_tx))?.status).toBe('0x1');
    const again = await deposit(second.url, apiKey, 1);
    expect(BigInt(again.shares_balance)).toBeGreaterThan(BigInt(made.shares_balance));
    const partA = await request(
      second.url,
      'GET',
      '/api/v1/agent/vault/positions',
      undefined,
      apiKey,
    );
    expect(partA.body.positions).toMatchObject([
      { vault_id: 'moderate', shares: formatUnits(BigInt(again.shares_balance), 6) },
    ]);
  });
});
