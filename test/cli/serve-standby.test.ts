import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Hex } from 'viem';
import { afterEach, describe, expect, it } from 'vitest';
import { anvilsStartedFor } from '../../src/sandbox/chain/anvil.ts';
import { isRunning } from '../../src/sandbox/process.ts';
import {
  depositOver,
  registerOver,
  rpcCall,
  type ServeProcess,
  until,
  useServes,
} from '../helpers/serve.ts';

/**
 * The chain's warm standby, from outside: a second anvil that mines every logged block again,
 * put in the place of an anvil killed with kill -9 (or changed under the sandbox), so that
 * writes go on at once instead of after a replay of the whole log.
 */
let state = '';
// Registered before useServes's: after-hooks run last-registered first, so this one runs once
// every serve is stopped. The anvils of a serve a test killed with kill -9 outlive it, as they
// would for a user.
afterEach(() => {
  for (const pid of state ? anvilsStartedFor(state) : []) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // Gone meanwhile.
    }
  }
  state = '';
});
const serves = useServes('serve-standby', 'standby-test-admin');
const { serve, request, stop } = serves;

/** serve on a state dir of the test's; checkpoints only on request, so the log keeps growing. */
async function serveState(): Promise<ServeProcess> {
  state ||= join(serves.dir(), 'state');
  return serve(['--state', state, '--rate-limit', 'off'], { AGENTCTL_CHECKPOINTS: 'manual' });
}

const pidIn = (file: string) => Number(readFileSync(join(state, file), 'utf8').split(' ')[0]);

async function info(url: string) {
  return (await request(url, 'GET', '/sandbox/info')).body;
}

/** Resolves once the standby has mined every block of the chain's head. */
async function standbyAtHead(url: string): Promise<void> {
  await until(async () => {
    const now = await info(url);
    const head = Number(await rpcCall(now.rpc_url, 'eth_blockNumber'));
    return now.standby.status === 'following' && now.standby.block_number === head;
  });
}

const deposit = depositOver;

async function status(rpcUrl: string, hash: Hex) {
  return ((await rpcCall(rpcUrl, 'eth_getTransactionReceipt', [hash])) as { status: Hex } | null)
    ?.status;
}

describe('the warm standby', () => {
  it('takes the place of a killed anvil at the log’s head: nothing replayed, nothing lost, and a new standby follows', async () => {
    const sandbox = await serveState();
    expect((await info(sandbox.url)).standby).toEqual({ status: 'none', block_number: null });
    const { apiKey } = await registerOver(sandbox.url);
    const { rpc_url: rpcUrl } = await info(sandbox.url);
    // A long log (400 blocks mined over the RPC URL, which the sandbox logs) and deposits.
    await rpcCall(rpcUrl, 'anvil_mine', ['0x190']);
    const made = [];
    for (const amount of [3, 4, 5]) made.push(await deposit(sandbox.url, apiKey, amount));
    await standbyAtHead(sandbox.url);
    const primary = pidIn('anvil.pid');
    const standby = pidIn('anvil-standby.pid');
    expect(standby).not.toBe(primary);
    const head = (await rpcCall(rpcUrl, 'eth_getBlockByNumber', ['latest', false])) as {
      number: Hex;
      hash: Hex;
    };

    process.kill(primary, 'SIGKILL');
    await until(async () => sandbox.stderr().includes('the chain is back'));
    expect(sandbox.stderr()).toContain(
      `anvil exited: the standby anvil (pid ${standby}), at the log's head, holds the chain now`,
    );
    expect(sandbox.stderr()).not.toContain('rebuilding the chain');
    expect(pidIn('anvil.pid')).toBe(standby);
    expect(isRunning(primary)).toBe(false);

    // The same chain on the same RPC URL: the same head block, every acknowledged deposit.
    const after = (await rpcCall(rpcUrl, 'eth_getBlockByNumber', [head.number, false])) as {
      hash: Hex;
    };
    expect(after.hash).toBe(head.hash);
    for (const { deposit_tx } of made) expect(await status(rpcUrl, deposit_tx)).toBe('0x1');
    const positions = await request(
      sandbox.url,
      'GET',
      '/api/v1/agent/vault/positions',
      undefined,
      apiKey,
    );
    expect(positions.body.positions).toMatchObject([{ vault_id: 'moderate', shares: '12' }]);
    const next = await deposit(sandbox.url, apiKey, 1);
    expect(await status(rpcUrl, next.deposit_tx)).toBe('0x1');

    // Another standby starts from a copy of the chain and follows the log up to the head.
    await standbyAtHead(sandbox.url);
    const second = pidIn('anvil-standby.pid');
    expect([primary, standby]).not.toContain(second);
    expect(isRunning(second)).toBe(true);

    await stop(sandbox);
    expect(anvilsStartedFor(state)).toEqual([]);
    expect(existsSync(join(state, 'anvil-standby.pid'))).toBe(false);
  });

  it('is started again when it is killed, and the chain never notices', async () => {
    const sandbox = await serveState();
    const { apiKey } = await registerOver(sandbox.url);
    await deposit(sandbox.url, apiKey, 2);
    await standbyAtHead(sandbox.url);
    const standby = pidIn('anvil-standby.pid');

    process.kill(standby, 'SIGKILL');
    await until(async () => sandbox.stderr().includes(`its process (pid ${standby}) exited`));
    expect((await request(sandbox.url, 'GET', '/health')).body.status).toBe('ok');
    await deposit(sandbox.url, apiKey, 3);
    await standbyAtHead(sandbox.url);
    expect(pidIn('anvil-standby.pid')).not.toBe(standby);
    expect(sandbox.stderr()).not.toContain('the chain is back');
  });

  it('is dropped when the chain was changed outside transactions, and the next copies the chain with the change', async () => {
    const sandbox = await serveState();
    const { apiKey } = await registerOver(sandbox.url);
    const { rpc_url: rpcUrl } = await info(sandbox.url);
    await deposit(sandbox.url, apiKey, 2);
    await standbyAtHead(sandbox.url);
    const standby = pidIn('anvil-standby.pid');

    // A cheat method: no block, no transaction; the next block's state root carries it, which
    // no replay of the log can give.
    const someone = '0x00000000000000000000000000000000000c4ea7';
    await rpcCall(rpcUrl, 'anvil_setBalance', [someone, '0x1234']);
    await deposit(sandbox.url, apiKey, 3);
    await until(async () =>
      /the standby anvil failed: its block \d+ came out other than the logged one/.test(
        sandbox.stderr(),
      ),
    );
    await standbyAtHead(sandbox.url);
    expect(pidIn('anvil-standby.pid')).not.toBe(standby);

    process.kill(pidIn('anvil.pid'), 'SIGKILL');
    await until(async () => sandbox.stderr().includes('the chain is back'));
    expect(sandbox.stderr()).toContain('holds the chain now');
    expect(await rpcCall(rpcUrl, 'eth_getBalance', [someone, 'latest'])).toBe('0x1234');
    await deposit(sandbox.url, apiKey, 1);
  });

  it('is replaced after a checkpoint asked for, which keeps a cheat method’s change that no block carries yet', async () => {
    const sandbox = await serveState();
    const { apiKey } = await registerOver(sandbox.url);
    const { rpc_url: rpcUrl } = await info(sandbox.url);
    await deposit(sandbox.url, apiKey, 2);
    await standbyAtHead(sandbox.url);
    const standby = pidIn('anvil-standby.pid');

    const someone = '0x00000000000000000000000000000000000c4ea8';
    await rpcCall(rpcUrl, 'anvil_setBalance', [someone, '0x5678']);
    expect((await request(sandbox.url, 'POST', '/sandbox/checkpoint')).status).toBe(200);
    await until(
      async () =>
        existsSync(join(state, 'anvil-standby.pid')) && pidIn('anvil-standby.pid') !== standby,
    );
    await standbyAtHead(sandbox.url);

    // No block since the change: only a standby started from that checkpoint has it.
    process.kill(pidIn('anvil.pid'), 'SIGKILL');
    await until(async () => sandbox.stderr().includes('the chain is back'));
    expect(sandbox.stderr()).toContain('holds the chain now');
    expect(await rpcCall(rpcUrl, 'eth_getBalance', [someone, 'latest'])).toBe('0x5678');
  });

  it('recovers when anvil dies while the next standby starts (a start waits for the producer the recovery holds)', async () => {
    const sandbox = await serveState();
    const { apiKey } = await registerOver(sandbox.url);
    const { rpc_url: rpcUrl } = await info(sandbox.url);
    // A log past 200 blocks: a standby then starts from a copy of the running chain, taken
    // under the producer's gate, which the rebuild below holds for a while.
    await rpcCall(rpcUrl, 'anvil_mine', ['0x12c']);
    const made = await deposit(sandbox.url, apiKey, 2);
    await standbyAtHead(sandbox.url);
    // The next standby starts a second after this one dies; the chain's anvil dies just
    // before that, and its rebuild (300 blocks) is under way when the start asks for the gate.
    process.kill(pidIn('anvil-standby.pid'), 'SIGKILL');
    await new Promise((resolve) => setTimeout(resolve, 900));
    process.kill(pidIn('anvil.pid'), 'SIGKILL');

    await until(async () => sandbox.stderr().includes('the chain is back'));
    expect(sandbox.stderr()).toContain('anvil exited: restarting anvil and rebuilding the chain');
    expect(await status(rpcUrl, made.deposit_tx)).toBe('0x1');
    await deposit(sandbox.url, apiKey, 3);
    await standbyAtHead(sandbox.url);
    await deposit(sandbox.url, apiKey, 4);
    await standbyAtHead(sandbox.url);
  });

  it('is taken over, with the chain’s anvil, by the serve started after a kill -9', async () => {
    const first = await serveState();
    const { apiKey } = await registerOver(first.url);
    await deposit(first.url, apiKey, 2);
    await standbyAtHead(first.url);
    const primary = pidIn('anvil.pid');
    const standby = pidIn('anvil-standby.pid');
    await stop(first, 'SIGKILL');

    const second = await serveState();
    expect(pidIn('anvil.pid')).toBe(primary);
    expect(pidIn('anvil-standby.pid')).toBe(standby);
    await deposit(second.url, apiKey, 3);
    await standbyAtHead(second.url);

    process.kill(primary, 'SIGKILL');
    await until(async () => second.stderr().includes('the chain is back'));
    expect(pidIn('anvil.pid')).toBe(standby);
    const positions = await request(
      second.url,
      'GET',
      '/api/v1/agent/vault/positions',
      undefined,
      apiKey,
    );
    expect(positions.body.positions).toMatchObject([{ vault_id: 'moderate', shares: '5' }]);
  });
});
