import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { type Address, createPublicClient, http } from 'viem';
import { describe, expect, it } from 'vitest';
import { SandboxInfo } from '../../src/api/schemas/index.ts';
import { startAnvil } from '../../src/sandbox/chain/anvil.ts';
import { SandboxVault } from '../../src/sandbox/chain/contracts/artifacts.ts';
import { runCli } from '../helpers/cli.ts';
import { BIN, registerOver, rpcCall, serveFailure, until, useServes } from '../helpers/serve.ts';

const serves = useServes('serve-chain', 'chain-test-admin');
const { serve, request, stop } = serves;

/** Alive and not a zombie waiting to be reaped by whoever inherited it. */
function isRunning(pid: number): boolean {
  try {
    return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
}

async function registerAgent(url: string) {
  return (await registerOver(url)).apiKey;
}

describe('serve with the chain', () => {
  it('restarts from a checkpoint far larger than anvil takes in one JSON-RPC request', async () => {
    const state = join(serves.dir(), 'state');
    const first = await serve(['--state', state]);
    await registerAgent(first.url);
    const { rpc_url: rpcUrl } = (await request(first.url, 'GET', '/sandbox/info')).body;
    // Incompressible code at 100 addresses: a chain state of megabytes, as months of use make.
    const codes = Array.from({ length: 100 }, (_, i) => ({
      address: `0x${(0xb0_0000 + i).toString(16).padStart(40, '0')}`,
      code: `0x${randomBytes(24_000).toString('hex')}`,
    }));
    for (const { address, code } of codes) await rpcCall(rpcUrl, 'anvil_setCode', [address, code]);
    const checkpoint = await request(first.url, 'POST', '/sandbox/checkpoint');
    expect(checkpoint.status).toBe(200);
    const file = join(state, 'chain', `checkpoint-${checkpoint.body.block_number}.json`);
    expect(statSync(file).size).toBeGreaterThan(4 * 1024 * 1024);
    await stop(first);

    const second = await serve(['--state', state]);
    const info = (await request(second.url, 'GET', '/sandbox/info')).body;
    expect(info.index.block_number).toBe(checkpoint.body.block_number);
    for (const { address, code } of [codes[0], codes[99]] as typeof codes) {
      expect(await rpcCall(info.rpc_url, 'eth_getCode', [address, 'latest'])).toBe(code);
    }
    expect(existsSync(join(state, 'anvil-load-state.json'))).toBe(false);
  });

  it('keeps every acknowledged transaction through kill -9, takes over its anvil, and leaves no anvil behind', async () => {
    const state = join(serves.dir(), 'state');
    const first = await serve(['--state', state]);
    const apiKey = await registerAgent(first.url);
    const deposit = await request(
      first.url,
      'POST',
      '/api/v1/agent/vault/deposit',
      { vault_id: 'moderate', amount_usdc: 123.45 },
      apiKey,
    );
    expect(deposit.status).toBe(200);
    const strategy = await request(
      first.url,
      'POST',
      '/api/v1/agent/strategy/submit',
      { name: 'Survivor', description: 'Outlives a kill -9.' },
      apiKey,
    );
    expect(strategy.status).toBe(200);
    expect(
      (await request(first.url, 'POST', '/api/v1/agent/faucet', undefined, apiKey)).status,
    ).toBe(200);
    const [firstAnvil] = readFileSync(join(state, 'anvil.pid'), 'utf8').split(' ').map(Number);

    first.child.kill('SIGKILL');
    await first.exited;
    expect(isRunning(firstAnvil as number)).toBe(true);

    const second = await serve(['--state', state]);
    // The anvil the killed serve left running holds the logged chain: it is taken over.
    expect(Number(readFileSync(join(state, 'anvil.pid'), 'utf8').split(' ')[0])).toBe(firstAnvil);
    expect(second.stderr()).not.toContain('is not used');
    const info = SandboxInfo.parse((await request(second.url, 'GET', '/sandbox/info')).body);
    const reader = createPublicClient({ transport: http(info.rpc_url) });
    const agentAddress = deposit.body.agent_address as Address;
    expect(
      await reader.readContract({
        address: info.contracts.vaults.moderate as Address,
        abi: SandboxVault.abi,
        functionName: 'balanceOf',
        args: [agentAddress],
      }),
    ).toBe(BigInt(deposit.body.shares_balance));
    const receipt = await reader.getTransactionReceipt({ hash: deposit.body.deposit_tx });
    expect(receipt.status).toBe('success');

    const list = await request(second.url, 'GET', '/api/v1/agent/strategy/list', undefined, apiKey);
    expect(list.body.strategies.map((s: { strategy_id: string }) => s.strategy_id)).toEqual([
      strategy.body.strategy_id,
    ]);
    const cooldown = await request(second.url, 'POST', '/api/v1/agent/faucet', undefined, apiKey);
    expect(cooldown.status).toBe(429);
    expect(cooldown.body.success).toBe(false);
    // New writes still work on the restored chain (the wallet's nonce is read afresh).
    const again = await request(
      second.url,
      'POST',
      '/api/v1/agent/vault/deposit',
      { vault_id: 'moderate', amount_usdc: 1 },
      apiKey,
    );
    expect(again.status).toBe(200);
    await stop(second);
    expect(isRunning(firstAnvil as number)).toBe(false);
  });

  it('keeps chain time and yield across a graceful restart', async () => {
    const state = join(serves.dir(), 'state');
    const first = await serve(['--state', state]);
    const apiKey = await registerAgent(first.url);
    const deposit = await request(
      first.url,
      'POST',
      '/api/v1/agent/vault/deposit',
      { vault_id: 'aggressive', amount_usdc: 1000 },
      apiKey,
    );
    expect(deposit.status).toBe(200);
    await request(first.url, 'POST', '/sandbox/clock/advance', { seconds: 30 * 24 * 3600 });
    const before = SandboxInfo.parse((await request(first.url, 'GET', '/sandbox/info')).body);
    // The block the advance mined (the clock read after it may be a second later already).
    const advanced = await createPublicClient({ transport: http(before.rpc_url) }).getBlock();
    const valueBefore = Number(
      (await request(first.url, 'GET', '/api/v1/agent/vault/positions', undefined, apiKey)).body
        .positions[0].value_usdc,
    );
    // 15 % a year for 30 days: about 12.3 USDC of yield on 1000.
    expect(valueBefore).toBeGreaterThan(1012);
    first.child.kill('SIGTERM');
    expect(await first.exited).toBe(0);
    serves.forget(first);

    const second = await serve(['--state', state]);
    const info = SandboxInfo.parse((await request(second.url, 'GET', '/sandbox/info')).body);
    expect(info.clock.offset_seconds - before.clock.offset_seconds).toBeLessThanOrEqual(1);
    expect(info.clock.offset_seconds).toBeGreaterThanOrEqual(before.clock.offset_seconds);
    const reader = createPublicClient({ transport: http(info.rpc_url) });
    const block = await reader.getBlock();
    expect(block.timestamp).toBeGreaterThanOrEqual(advanced.timestamp);
    expect(Number(advanced.timestamp)).toBeGreaterThanOrEqual(before.clock.now - 30);
    // Only the restored chain has the deposit, and the yield it earned over the month.
    const receipt = await reader.getTransactionReceipt({ hash: deposit.body.deposit_tx });
    expect(receipt.status).toBe('success');
    const valueAfter = Number(
      (await request(second.url, 'GET', '/api/v1/agent/vault/positions', undefined, apiKey)).body
        .positions[0].value_usdc,
    );
    expect(valueAfter).toBeGreaterThanOrEqual(valueBefore);
  });

  it('refuses a chain checkpoint with another format version', async () => {
    const state = join(serves.dir(), 'state');
    const first = await serve(['--state', state]);
    await registerAgent(first.url);
    first.child.kill('SIGTERM');
    await first.exited;
    serves.forget(first);
    const [name] = readdirSync(join(state, 'chain'));
    const checkpointPath = join(state, 'chain', name as string);
    const checkpoint = JSON.parse(readFileSync(checkpointPath, 'utf8'));
    writeFileSync(checkpointPath, JSON.stringify({ ...checkpoint, format: 7 }));
    const result = await serveFailure(['--port', '0', '--state', state]);
    expect(result.code).toBe(1);
    expect(result.stderr).toContain(`${checkpointPath} has checkpoint format 7`);
    expect(result.stderr).not.toMatch(/\n\s+at /);
    // The refused start left no anvil running.
    expect(existsSync(join(state, 'anvil.pid'))).toBe(false);
  });

  it('cleans up the anvils (the chain and its standby) and temporary dir of a serve killed without --state', async () => {
    const first = await serve([]);
    const tempDir = /state: (\S+)/.exec(first.stdout())?.[1] as string;
    // The first block logged starts the standby.
    await registerAgent(first.url);
    await until(
      async () =>
        (await request(first.url, 'GET', '/sandbox/info')).body.standby.status === 'following',
    );
    const anvils = ['anvil.pid', 'anvil-standby.pid'].map((file) =>
      Number(readFileSync(join(tempDir, file), 'utf8').split(' ')[0]),
    );
    first.child.kill('SIGKILL');
    await first.exited;
    serves.forget(first);
    for (const pid of anvils) expect(isRunning(pid)).toBe(true);

    await serve([]);
    for (const pid of anvils) expect(isRunning(pid)).toBe(false);
    expect(existsSync(tempDir)).toBe(false);
  });

  it('restarts a killed anvil and rebuilds the chain from its checkpoint and log when its standby is killed too', async () => {
    const state = join(serves.dir(), 'state');
    const sandbox = await serve(['--state', state, '--log-level', 'info']);
    const apiKey = await registerAgent(sandbox.url);
    const deposit = await request(
      sandbox.url,
      'POST',
      '/api/v1/agent/vault/deposit',
      { vault_id: 'aggressive', amount_usdc: 42 },
      apiKey,
    );
    expect(deposit.status).toBe(200);
    const info = SandboxInfo.parse((await request(sandbox.url, 'GET', '/sandbox/info')).body);
    const reader = createPublicClient({ transport: http(info.rpc_url) });
    const before = await reader.getBlock({ blockTag: 'latest' });
    await until(
      async () =>
        (await request(sandbox.url, 'GET', '/sandbox/info')).body.standby.status === 'following',
    );
    const [anvilPid] = readFileSync(join(state, 'anvil.pid'), 'utf8').split(' ').map(Number);
    const [standbyPid] = readFileSync(join(state, 'anvil-standby.pid'), 'utf8')
      .split(' ')
      .map(Number);

    // Both at once: no standby is left to take over (the next starts a second later).
    process.kill(standbyPid as number, 'SIGKILL');
    process.kill(anvilPid as number, 'SIGKILL');
    const statuses: string[] = [];
    for (let i = 0; i < 100; i++) {
      const health = await request(sandbox.url, 'GET', '/health');
      statuses.push(health.body.status);
      if (health.body.status === 'ok' && statuses.includes('degraded')) break;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    expect(statuses).toContain('degraded');
    expect(statuses.at(-1)).toBe('ok');
    expect(sandbox.stderr()).toContain('anvil exited: restarting anvil and rebuilding the chain');

    // The same chain, on the same URL: the same head block, and the deposit's receipt.
    expect((await reader.getBlock({ blockNumber: before.number })).hash).toBe(before.hash);
    const receipt = await reader.getTransactionReceipt({ hash: deposit.body.deposit_tx });
    expect(receipt.status).toBe('success');
    const positions = await request(
      sandbox.url,
      'GET',
      '/api/v1/agent/vault/positions',
      undefined,
      apiKey,
    );
    expect(positions.body.positions).toMatchObject([{ vault_id: 'aggressive', shares: '42' }]);
    const again = await request(
      sandbox.url,
      'POST',
      '/api/v1/agent/vault/deposit',
      { vault_id: 'aggressive', amount_usdc: 1 },
      apiKey,
    );
    expect(again.status).toBe(200);
    expect(isRunning(anvilPid as number)).toBe(false);
  });

  it('refuses to start when its chain checkpoint is gone', async () => {
    const state = join(serves.dir(), 'state');
    const first = await serve(['--state', state]);
    await registerAgent(first.url);
    first.child.kill('SIGTERM');
    await first.exited;
    serves.forget(first);
    rmSync(join(state, 'chain'), { recursive: true });
    const result = await serveFailure(['--port', '0', '--state', state]);
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/the chain checkpoint \S+checkpoint-\d+\.json is missing/);
  });

  it('shuts down gracefully on a Ctrl-C sent to its whole process group', async () => {
    const state = join(serves.dir(), 'state');
    const child = spawn(
      process.execPath,
      [BIN, 'serve', '--port', '0', '--state', state, '--log-level', 'warn'],
      { detached: true, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    const exited = new Promise<number | null>((resolve) =>
      child.on('exit', (code) => resolve(code)),
    );
    let out = '';
    await new Promise<void>((resolve) => {
      child.stdout.on('data', (chunk) => {
        out += chunk;
        if (out.includes('listening on')) resolve();
      });
    });
    const [anvilPid] = readFileSync(join(state, 'anvil.pid'), 'utf8').split(' ').map(Number);
    process.kill(-(child.pid as number), 'SIGINT');
    expect(await exited).toBe(0);
    expect(isRunning(anvilPid as number)).toBe(false);
    expect(existsSync(join(state, 'anvil.pid'))).toBe(false);
  });
});

describe('serve --rpc-url', () => {
  it('agentctl health exits 1 while the node behind the service is down', async () => {
    const node = await startAnvil({ stateDir: serves.dir() });
    try {
      const sandbox = await serve(['--rpc-url', node.rpcUrl]);
      const env = { AGENTCTL_CONFIG_DIR: join(serves.dir(), 'config') };
      expect((await runCli(['--base-url', sandbox.url, 'health'], env)).code).toBe(0);
      await node.stop();
      // The service re-checks its node at most once a second: wait for it to notice.
      let down = await runCli(['--base-url', sandbox.url, 'health'], env);
      for (let i = 0; i < 20 && down.code === 0; i++) {
        await new Promise((resolve) => setTimeout(resolve, 200));
        down = await runCli(['--base-url', sandbox.url, 'health'], env);
      }
      expect(down.stdout).toMatch(/^status\s+degraded$/m);
      expect(down.stderr).toContain('the service is degraded');
      expect(down.code).toBe(1);
    } finally {
      await node.stop();
    }
  });

  it('deploys on an existing dev chain once, and finds the contracts again after a restart', async () => {
    const node = await startAnvil({ stateDir: serves.dir() });
    try {
      const state = join(serves.dir(), 'state');
      const first = await serve(['--rpc-url', node.rpcUrl, '--state', state]);
      const info = SandboxInfo.parse((await request(first.url, 'GET', '/sandbox/info')).body);
      expect(info.rpc_url).toBe(node.rpcUrl);
      expect(JSON.parse(readFileSync(join(state, 'deployment.json'), 'utf8'))).toEqual(
        info.contracts,
      );
      const apiKey = await registerAgent(first.url);
      const deposit = await request(
        first.url,
        'POST',
        '/api/v1/agent/vault/deposit',
        { vault_id: 'hedged', amount_usdc: 7 },
        apiKey,
      );
      expect(deposit.status).toBe(200);
      first.child.kill('SIGTERM');
      await first.exited;
      serves.forget(first);

      const second = await serve(['--rpc-url', node.rpcUrl, '--state', state]);
      const again = SandboxInfo.parse((await request(second.url, 'GET', '/sandbox/info')).body);
      expect(again.contracts).toEqual(info.contracts);
      const positions = await request(
        second.url,
        'GET',
        '/api/v1/agent/vault/positions',
        undefined,
        apiKey,
      );
      expect(positions.body.positions).toMatchObject([{ vault_id: 'hedged', shares: '7' }]);
    } finally {
      await node.stop();
    }
  });

  it('fails to start, in one line, when the node is unreachable or the deployment file is missing', async () => {
    const unreachable = await serveFailure(['--port', '0', '--rpc-url', 'http://127.0.0.1:1']);
    expect(unreachable.code).toBe(1);
    expect(unreachable.stderr).toContain('cannot reach the chain at http://127.0.0.1:1');
    expect(unreachable.stderr).not.toMatch(/\n\s+at /);

    const node = await startAnvil({ stateDir: serves.dir() });
    try {
      const missing = await serveFailure([
        '--port',
        '0',
        '--rpc-url',
        node.rpcUrl,
        '--deployment',
        join(serves.dir(), 'nope.json'),
      ]);
      expect(missing.code).toBe(1);
      expect(missing.stderr).toContain('nope.json: no such file');
    } finally {
      await node.stop();
    }
  });
});
