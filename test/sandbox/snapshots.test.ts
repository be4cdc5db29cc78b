import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { erc20Abi } from 'viem';
import { describe, expect, it } from 'vitest';
import { call, chainAgent, chainReader, useChainSandbox } from '../helpers/chain.ts';
import { ADMIN_TOKEN, admin, type TestSandbox } from '../helpers/sandbox.ts';

/**
 * Snapshots and restores on a real sandbox: the chain, sandbox.db, index.db and the clock
 * go back together, and the sandbox goes on from there.
 */
let sandbox: TestSandbox;
useChainSandbox((started) => {
  sandbox = started;
});

const snapshotAs = (name: string, replace?: boolean) =>
  admin(sandbox.app, 'POST', '/sandbox/snapshots', {
    name,
    ...(replace !== undefined && { replace }),
  });
const restore = (name: string) => admin(sandbox.app, 'POST', `/sandbox/snapshots/${name}/restore`);
const blockNumber = async () => Number(await chainReader(sandbox).getBlockNumber());
const position = async (apiKey: string) =>
  (await call(sandbox, apiKey, 'GET', '/api/v1/agent/vault/positions')).json();
const deposit = (apiKey: string, amount: number) =>
  call(sandbox, apiKey, 'POST', '/api/v1/agent/vault/deposit', {
    vault_id: 'moderate',
    amount_usdc: amount,
  });

describe('snapshots', () => {
  it('refuses bad names, an existing name without replace, and touching genesis', async () => {
    for (const name of ['', '.', '..', 'a/b', 'x'.repeat(65), 'sp ace']) {
      const refused = await snapshotAs(name);
      expect(refused.statusCode, name).toBe(400);
      expect(refused.json().error).toMatch(/name/);
    }
    expect((await snapshotAs('genesis')).statusCode).toBe(409);
    expect((await snapshotAs('first')).statusCode).toBe(200);
    const again = await snapshotAs('first');
    expect(again.statusCode).toBe(409);
    expect(again.json().error).toMatch(/replace/);
    expect((await snapshotAs('first', true)).statusCode).toBe(200);
    const deleteGenesis = await sandbox.app.inject({
      method: 'DELETE',
      url: '/sandbox/snapshots/genesis',
      headers: { 'x-admin-token': ADMIN_TOKEN },
    });
    expect(deleteGenesis.statusCode).toBe(409);
    expect((await restore('nothing-here')).statusCode).toBe(404);
    const unauthorised = await sandbox.app.inject({ method: 'GET', url: '/sandbox/snapshots' });
    expect(unauthorised.statusCode).toBe(401);
  });

  it('restores the chain, the agents, the index and the clock as they were', async () => {
    const alice = await chainAgent(sandbox);
    expect((await deposit(alice.apiKey, 100)).statusCode).toBe(200);
    const taken = await snapshotAs('with-alice');
    expect(taken.statusCode).toBe(200);
    const snapshot = taken.json();
    const at = await blockNumber();
    expect(snapshot).toMatchObject({ name: 'with-alice', block_number: at });
    expect(snapshot.size_bytes).toBeGreaterThan(0);
    const dir = join(sandbox.dir, 'snapshots');
    expect(statSync(dir).mode & 0o777).toBe(0o700);
    expect(readdirSync(join(dir, 'with-alice')).sort()).toEqual([
      'chain.json',
      'index.db',
      'sandbox.db',
      'snapshot.json',
    ]);
    const before = {
      position: await position(alice.apiKey),
      vaults: (await sandbox.app.inject({ url: '/v1/vaults' })).json(),
      clock: (await admin(sandbox.app, 'GET', '/sandbox/info')).json().clock,
    };

    // Afterwards: another agent, another deposit, 30 days on.
    const bob = await chainAgent(sandbox);
    expect((await deposit(alice.apiKey, 50)).statusCode).toBe(200);
    expect((await deposit(bob.apiKey, 10)).statusCode).toBe(200);
    const advanced = await admin(sandbox.app, 'POST', '/sandbox/clock/advance', {
      seconds: 30 * 86_400,
    });
    expect(advanced.statusCode).toBe(200);
    expect(await blockNumber()).toBeGreaterThan(at);

    const restored = await restore('with-alice');
    expect(restored.statusCode, restored.body).toBe(200);
    expect(restored.json()).toMatchObject({ name: 'with-alice', block_number: at });
    expect(restored.json().restored_in_ms).toBeGreaterThan(0);

    expect(await blockNumber()).toBe(at);
    // Bob's key was issued after the snapshot; Alice's before.
    expect((await call(sandbox, bob.apiKey, 'GET', '/api/v1/agent/wallet')).statusCode).toBe(401);
    expect((await call(sandbox, alice.apiKey, 'GET', '/api/v1/agent/wallet')).statusCode).toBe(200);
    expect(await position(alice.apiKey)).toEqual(before.position);
    expect((await sandbox.app.inject({ url: '/v1/vaults' })).json()).toEqual(before.vaults);
    const clock = (await admin(sandbox.app, 'GET', '/sandbox/info')).json().clock;
    expect(clock.offset_seconds).toBe(before.clock.offset_seconds);
    // Bob's server-side wallet holds nothing on the restored chain.
    const usdc = sandbox.chain.deployment.usdc;
    const bobsUsdc = await chainReader(sandbox).readContract({
      address: usdc,
      abi: erc20Abi,
      functionName: 'balanceOf',
      args: [bob.agentAddress],
    });
    expect(bobsUsdc).toBe(0n);

    // The next write goes on from the snapshot's block, with the wallets' nonces read again.
    expect((await deposit(alice.apiKey, 5)).statusCode).toBe(200);
    expect(await blockNumber()).toBe(at + 1);
    const carol = await chainAgent(sandbox);
    expect((await deposit(carol.apiKey, 1)).statusCode).toBe(200);
  });

  it('restores genesis: a new, empty sandbox in the same state dir', async () => {
    const restored = await restore('genesis');
    expect(restored.statusCode, restored.body).toBe(200);
    expect(restored.json().block_number).toBe(await blockNumber());
    const stats = (await sandbox.app.inject({ url: '/api/v1/agents/stats' })).json();
    expect(stats.total_agents).toBe(0);
    const listed = (await admin(sandbox.app, 'GET', '/sandbox/snapshots')).json().snapshots;
    expect(listed.map((entry: { name: string }) => entry.name)).toEqual([
      'genesis',
      'first',
      'with-alice',
    ]);
    // The snapshots survive it; the sandbox works.
    const dave = await chainAgent(sandbox);
    expect((await deposit(dave.apiKey, 2)).statusCode).toBe(200);
    expect((await restore('with-alice')).statusCode).toBe(200);
    expect((await call(sandbox, dave.apiKey, 'GET', '/api/v1/agent/wallet')).statusCode).toBe(401);
  });

  it('deletes a snapshot', async () => {
    const deleted = await sandbox.app.inject({
      method: 'DELETE',
      url: '/sandbox/snapshots/first',
      headers: { 'x-admin-token': ADMIN_TOKEN },
    });
    expect(deleted.statusCode).toBe(200);
    expect(deleted.json()).toEqual({ name: 'first', deleted: true });
    expect(existsSync(join(sandbox.dir, 'snapshots', 'first'))).toBe(false);
    const again = await sandbox.app.inject({
      method: 'DELETE',
      url: '/sandbox/snapshots/first',
      headers: { 'x-admin-token': ADMIN_TOKEN },
    });
    expect(again.statusCode).toBe(404);
  });
});
