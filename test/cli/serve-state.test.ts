import {
  chmodSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { type Address, createPublicClient, type Hash, http, parseEther } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { SandboxInfo } from '../../src/api/schemas/index.ts';
import { anvilsStartedFor, startAnvil } from '../../src/sandbox/chain/anvil.ts';
import { SandboxVault } from '../../src/sandbox/chain/contracts/artifacts.ts';
import { GENESIS_KEYS } from '../../src/sandbox/chain/wallets.ts';
import {
  registerOver,
  requestOver,
  type ServeProcess,
  serveFailure,
  startServe,
} from '../helpers/serve.ts';

/**
 * The state dir from outside: what survives kill -9 at the worst moments, and what is refused
 * when the files in it no longer belong together.
 */
const TOKEN = 'state-test-admin';
let dir: string;
let state: string;
const running: ServeProcess[] = [];
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'agentctl-serve-state-'));
  state = join(dir, 'state');
});
afterEach(async () => {
  for (const serve of running.splice(0)) {
    serve.child.kill('SIGTERM');
    await serve.exited;
  }
  // The anvil of a serve a test killed with kill -9 outlives it, as it would for a user.
  for (const pid of anvilsStartedFor(state)) process.kill(pid, 'SIGKILL');
  rmSync(dir, { recursive: true, force: true });
});

async function serve(env: NodeJS.ProcessEnv = {}, args: string[] = []) {
  const started = await startServe(
    [
      '--state',
      state,
      '--admin-token',
      TOKEN,
      '--log-level',
      'warn',
      '--rate-limit',
      'off',
      ...args,
    ],
    env,
  );
  running.push(started);
  return started;
}

async function stop(serve: ServeProcess, signal: NodeJS.Signals = 'SIGTERM') {
  serve.child.kill(signal);
  await serve.exited;
  running.splice(running.indexOf(serve), 1);
}

const call = (url: string, method: string, path: string, body?: object, key?: string) =>
  requestOver(url, TOKEN, method, path, body, key);

const deposit = (url: string, key: string, amount: number) =>
  call(
    url,
    'POST',
    '/api/v1/agent/vault/deposit',
    { vault_id: 'moderate', amount_usdc: amount },
    key,
  );

async function reader(url: string) {
  const info = SandboxInfo.parse((await call(url, 'GET', '/sandbox/info')).body);
  return { info, chain: createPublicClient({ transport: http(info.rpc_url) }) };
}

async function blockHashes(url: string) {
  const { chain } = await reader(url);
  const head = await chain.getBlockNumber();
  const blocks = await Promise.all(
    Array.from({ length: Number(head) + 1 }, (_, n) => chain.getBlock({ blockNumber: BigInt(n) })),
  );
  return blocks.map((block) => ({ hash: block.hash, txs: block.transactions }));
}

/** kill -9 of serve and of its anvil, as a power loss would end both. */
async function stopWithAnvil(serve: ServeProcess) {
  const [anvilPid] = readFileSync(join(state, 'anvil.pid'), 'utf8').split(' ').map(Number);
  await stop(serve, 'SIGKILL');
  process.kill(anvilPid as number, 'SIGKILL');
}

function isAlive(pid: number): boolean {
  try {
    return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
}

describe('durable writes', () => {
  it('rebuilds the same blocks and transaction hashes from the log after kill -9 of serve and anvil', async () => {
    // Every block from the genesis on is replayed (a chain loaded from a checkpoint answers
    // another block 0, an anvil quirk).
    const first = await serve({ AGENTCTL_CHECKPOINTS: 'manual' });
    const { apiKey } = await registerOver(first.url);
    expect((await deposit(first.url, apiKey, 3)).status).toBe(200);
    const submitted = await call(
      first.url,
      'POST',
      '/api/v1/agent/strategy/submit',
      { name: 'Replayed', description: 'Mined again, identically.' },
      apiKey,
    );
    expect(submitted.status).toBe(200);
    expect(
      (await call(first.url, 'POST', '/sandbox/clock/advance', { seconds: 86_400 })).status,
    ).toBe(200);
    const before = await blockHashes(first.url);
    // anvil dies too: the chain is rebuilt from the log, not taken over.
    await stopWithAnvil(first);

    const second = await serve({ AGENTCTL_CHECKPOINTS: 'manual' });
    const after = await blockHashes(second.url);
    expect(after).toEqual(before);
    expect(after.some((block) => block.txs.includes(submitted.body.tx_hash))).toBe(true);
  });

  it('keeps every acknowledged write of a concurrent burst through kill -9, with rows and chain in step', async () => {
    const first = await serve();
    const agents = await Promise.all(Array.from({ length: 6 }, () => registerOver(first.url)));
    const keys = agents.map((agent) => agent.apiKey);
    const acknowledged: Array<{ key: string; tx: Hash }> = [];
    let killed = false;
    const burst = keys.flatMap((key) =>
      Array.from({ length: 5 }, async () => {
        const response = await deposit(first.url, key, 1).catch(() => undefined);
        if (response?.status === 200 && !killed) {
          acknowledged.push({ key, tx: response.body.deposit_tx });
          if (acknowledged.length === 12) {
            killed = true;
            first.child.kill('SIGKILL');
          }
        }
      }),
    );
    await Promise.all(burst);
    await first.exited;
    running.splice(running.indexOf(first), 1);
    expect(acknowledged).toHaveLength(12);

    // The start-up checks (the chain's onboarded agents against the database) pass.
    const second = await serve();
    const { info, chain } = await reader(second.url);
    for (const { tx } of acknowledged) {
      expect((await chain.getTransactionReceipt({ hash: tx })).status).toBe('success');
    }
    // Each agent's deposits as the database counts them (its score) match its shares onchain.
    for (const { apiKey: key, account } of agents) {
      const wallet = (await call(second.url, 'GET', '/api/v1/agent/wallet', undefined, key)).body;
      const shares = await chain.readContract({
        address: info.contracts.vaults.moderate as Address,
        abi: SandboxVault.abi,
        functionName: 'balanceOf',
        args: [wallet.agent_address],
      });
      const lookup = await call(
        second.url,
        'GET',
        `/api/v1/agent/auth/lookup?wallet=${account.address}`,
      );
      const depositsInDatabase = Math.round(lookup.body.performance_score * 100);
      expect(shares).toBe(BigInt(depositsInDatabase) * 10n ** 6n);
      const acked = acknowledged.filter((entry) => entry.key === key).length;
      expect(depositsInDatabase).toBeGreaterThanOrEqual(acked);
    }
  });

  it('keeps a write whose commit landed just before a crash, whole', async () => {
    const first = await serve({ AGENTCTL_SANDBOX_FAULT: 'crash-after-commit' });
    const { account, apiKey } = await registerOver(first.url);
    // The first block with a write in it is the one that funds this agent's wallet:
    // its commit lands, and the process dies before the wallet request is answered.
    const wallet = await call(first.url, 'GET', '/api/v1/agent/wallet', undefined, apiKey).catch(
      () => undefined,
    );
    expect(wallet).toBeUndefined();
    expect(await first.exited).toBe('SIGKILL');
    running.splice(running.indexOf(first), 1);

    const second = await serve();
    const funded = await call(second.url, 'GET', '/api/v1/agent/wallet', undefined, apiKey);
    expect(funded.body.usdc_balance).toBe(10_000);
    const nfts = await call(second.url, 'POST', '/api/v1/nfts', {
      wallet_address: account.address,
    });
    expect(nfts.body.total).toBe(1);
  });

  it('funds an agent registered just before a crash, at the next start', async () => {
    const first = await serve({ AGENTCTL_SANDBOX_FAULT: 'crash-before-onboarding' });
    const { account, apiKey } = await registerOver(first.url);
    expect(await first.exited).toBe('SIGKILL');
    running.splice(running.indexOf(first), 1);

    // The agent is registered but its wallet is not funded: the start-up check allows for
    // the outbox, and the start sends it.
    const second = await serve();
    const funded = await call(second.url, 'GET', '/api/v1/agent/wallet', undefined, apiKey);
    expect(funded.status).toBe(200);
    expect(funded.body.usdc_balance).toBe(10_000);
    const nfts = await call(second.url, 'POST', '/api/v1/nfts', {
      wallet_address: account.address,
    });
    expect(nfts.body.total).toBe(1);
  });

  it.each(['crash-before-checkpoint', 'crash-in-checkpoint'])(
    'loses nothing when kill -9 hits a checkpoint (%s)',
    async (fault) => {
      // Only the checkpoint asked for below may hit the crash point.
      const first = await serve({ AGENTCTL_SANDBOX_FAULT: fault, AGENTCTL_CHECKPOINTS: 'manual' });
      const { apiKey } = await registerOver(first.url);
      const made = await deposit(first.url, apiKey, 9);
      expect(made.status).toBe(200);
      await call(first.url, 'POST', '/sandbox/checkpoint').catch(() => undefined);
      expect(await first.exited).toBe('SIGKILL');
      running.splice(running.indexOf(first), 1);

      const second = await serve();
      const positions = await call(
        second.url,
        'GET',
        '/api/v1/agent/vault/positions',
        undefined,
        apiKey,
      );
      expect(positions.body.positions).toMatchObject([{ vault_id: 'moderate', shares: '9' }]);
      // No temp file is left, and at most one checkpoint.
      const files = existsSync(join(state, 'chain')) ? readdirSync(join(state, 'chain')) : [];
      expect(files.every((name) => /^checkpoint-\d+\.json$/.test(name))).toBe(true);
      expect(files.length).toBeLessThanOrEqual(1);
      const checkpoint = await call(second.url, 'POST', '/sandbox/checkpoint');
      expect(checkpoint.status).toBe(200);
      expect(readdirSync(join(state, 'chain'))).toEqual([
        `checkpoint-${checkpoint.body.block_number}.json`,
      ]);
    },
  );

  it('still starts, keeping every transaction, when a cheat method changed the chain before a crash of serve and anvil', async () => {
    // No checkpoint may keep the cheat's change before the crash.
    const first = await serve({ AGENTCTL_CHECKPOINTS: 'manual' });
    const { apiKey } = await registerOver(first.url);
    const { info } = await reader(first.url);
    // State changed outside any transaction: the next block's state root includes it.
    await fetch(info.rpc_url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'anvil_setBalance',
        params: ['0x000000000000000000000000000000000000cafe', '0x1000'],
      }),
    });
    const made = await deposit(first.url, apiKey, 6);
    expect(made.status).toBe(200);
    const receipt = await (await reader(first.url)).chain.getTransactionReceipt({
      hash: made.body.deposit_tx,
    });
    // Both die, as at a power loss (a surviving anvil would be taken over, its change kept).
    await stopWithAnvil(first);

    const second = await serve({ AGENTCTL_CHECKPOINTS: 'manual' });
    // The blocks since the cheat (the deposit's among them) come out with other hashes.
    const rehashed = /from block (\d+) on replayed with other hashes than the logged ones/.exec(
      second.stderr(),
    );
    expect(Number(rehashed?.[1])).toBeLessThanOrEqual(Number(receipt.blockNumber));
    const again = await (await reader(second.url)).chain.getTransactionReceipt({
      hash: made.body.deposit_tx,
    });
    expect(again.blockNumber).toBe(receipt.blockNumber);
    expect(again.status).toBe('success');
    const positions = await call(
      second.url,
      'GET',
      '/api/v1/agent/vault/positions',
      undefined,
      apiKey,
    );
    expect(positions.body.positions).toMatchObject([{ vault_id: 'moderate', shares: '6' }]);
    // The log now describes the rebuilt chain: another restart replays it without a word.
    await stopWithAnvil(second);
    const third = await serve({ AGENTCTL_CHECKPOINTS: 'manual' });
    expect(third.stderr()).not.toContain('replayed with other hashes');
  });

  it('logs what others send over the RPC URL, so it survives kill -9 too', async () => {
    const first = await serve();
    const { info } = await reader(first.url);
    const treasury = privateKeyToAccount(GENESIS_KEYS.treasury);
    const rpc = createPublicClient({ transport: http(info.rpc_url) });
    const raw = await treasury.signTransaction({
      type: 'eip1559',
      chainId: info.chain_id,
      nonce: await rpc.getTransactionCount({ address: treasury.address }),
      to: '0x000000000000000000000000000000000000bEEF',
      value: parseEther('2'),
      gas: 21_000n,
      maxFeePerGas: 10n ** 10n,
      maxPriorityFeePerGas: 0n,
    });
    const hash = await rpc.sendRawTransaction({ serializedTransaction: raw });
    // The sandbox mines what others send within its poll interval.
    const receipt = await rpc.waitForTransactionReceipt({
      hash,
      timeout: 5000,
      pollingInterval: 50,
    });
    // The block was mined by the sandbox's poller, which logs it before it lets a checkpoint
    // run: once this checkpoint is answered, the block is in the log.
    expect((await call(first.url, 'POST', '/sandbox/checkpoint')).status).toBe(200);
    await stop(first, 'SIGKILL');

    const second = await serve();
    const { chain } = await reader(second.url);
    const again = await chain.getTransactionReceipt({ hash });
    expect(again.blockHash).toBe(receipt.blockHash);
    expect(await chain.getBalance({ address: '0x000000000000000000000000000000000000bEEF' })).toBe(
      parseEther('2'),
    );
  });
});

describe('state that cannot silently diverge', () => {
  it('rebuilds the chain when someone resets it over the RPC URL, and never checkpoints the wiped chain', async () => {
    const first = await serve();
    const { apiKey } = await registerOver(first.url);
    expect((await deposit(first.url, apiKey, 4)).status).toBe(200);
    const { info } = await reader(first.url);
    for (let i = 0; i < 400; i++) {
      const standby = (await call(first.url, 'GET', '/sandbox/info')).body.standby;
      if (standby.status === 'following') break;
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
    await fetch(info.rpc_url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'anvil_reset', params: [] }),
    });
    // A checkpoint now would save the wiped chain: it is refused and the chain rebuilt.
    await call(first.url, 'POST', '/sandbox/checkpoint');
    let positions: Awaited<ReturnType<typeof call>> | undefined;
    for (let i = 0; i < 100; i++) {
      positions = await call(first.url, 'GET', '/api/v1/agent/vault/positions', undefined, apiKey);
      if (positions.status === 200 && positions.body.positions.length === 1) break;
      await new Promise((resolve) => setTimeout(resolve, 30));
    }
    expect(positions?.body.positions).toMatchObject([{ vault_id: 'moderate', shares: '4' }]);
    // Found by the checkpoint's check or by the poller, whichever looked first; the standby,
    // which only ever mined logged blocks, takes over. (Its log line may reach us after the
    // answer that shows the chain back.)
    for (let i = 0; i < 200 && !first.stderr().includes('holds the chain now'); i++) {
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
    expect(first.stderr()).toMatch(
      /the standby anvil \(pid \d+\), at the log's head, holds the chain now/,
    );
    expect((await deposit(first.url, apiKey, 1)).status).toBe(200);
    await stop(first);

    const second = await serve();
    const after = await call(second.url, 'GET', '/api/v1/agent/vault/positions', undefined, apiKey);
    expect(after.body.positions).toMatchObject([{ vault_id: 'moderate', shares: '5' }]);
  });

  it('refuses to start without its sandbox.db, instead of handing old wallets to new agents', async () => {
    const first = await serve();
    await registerOver(first.url);
    await stop(first);
    for (const name of ['sandbox.db', 'sandbox.db-wal', 'sandbox.db-shm']) {
      rmSync(join(state, name), { force: true });
    }
    const result = await serveFailure(['--port', '0', '--state', state]);
    expect(result.code).toBe(1);
    expect(result.stderr).toContain(`${join(state, 'sandbox.db')} is missing or empty`);
  });

  it('refuses an older copy of sandbox.db', async () => {
    const first = await serve();
    await registerOver(first.url);
    await stop(first);
    const backup = join(dir, 'backup.db');
    copyFileSync(join(state, 'sandbox.db'), backup);
    const second = await serve();
    await registerOver(second.url);
    await stop(second);
    copyFileSync(backup, join(state, 'sandbox.db'));
    rmSync(join(state, 'sandbox.db-wal'), { force: true });
    const result = await serveFailure(['--port', '0', '--state', state]);
    expect(result.code).toBe(1);
    expect(result.stderr).toContain('sandbox.db is older than the chain checkpoint');
  });

  it('refuses a missing or swapped wallet.mnemonic, and names a damaged one', async () => {
    const first = await serve();
    await registerOver(first.url);
    await stop(first);
    const path = join(state, 'wallet.mnemonic');
    const original = readFileSync(path, 'utf8');

    rmSync(path);
    let result = await serveFailure(['--port', '0', '--state', state]);
    expect(result.code).toBe(1);
    expect(result.stderr).toContain(`${path} is missing, but every agent wallet`);
    expect(existsSync(path)).toBe(false);

    for (const content of ['', 'not a mnemonic at all\n']) {
      writeFileSync(path, content, { mode: 0o600 });
      result = await serveFailure(['--port', '0', '--state', state]);
      expect(result.code).toBe(1);
      expect(result.stderr).toContain(`${path} does not hold a valid BIP-39 mnemonic`);
    }

    writeFileSync(
      path,
      'legal winner thank year wave sausage worth useful legal winner thank yellow\n',
    );
    result = await serveFailure(['--port', '0', '--state', state]);
    expect(result.stderr).toContain(`${path} is not the mnemonic this sandbox was created with`);

    writeFileSync(path, original);
    await serve();
  });

  it('never lets chain time go back when the clock is behind the chain', async () => {
    const first = await serve();
    const { apiKey } = await registerOver(first.url);
    await call(first.url, 'POST', '/sandbox/clock/advance', { seconds: 3 * 86_400 });
    const { chain } = await reader(first.url);
    const latest = await chain.getBlock();
    await stop(first);
    // As if an older clock were restored (or the wall clock stepped back three days).
    const db = new DatabaseSync(join(state, 'sandbox.db'));
    db.prepare("UPDATE meta SET value = '0' WHERE key = 'clock_offset_seconds'").run();
    db.close();

    const second = await serve();
    const { info } = await reader(second.url);
    expect(info.clock.now).toBeGreaterThanOrEqual(Number(latest.timestamp) + 1);
    expect((await call(second.url, 'GET', '/api/v1/vaults')).status).toBe(200);
    expect((await deposit(second.url, apiKey, 2)).status).toBe(200);
    const next = await (await reader(second.url)).chain.getBlock();
    expect(next.timestamp).toBeGreaterThan(latest.timestamp);
  });

  it('gives the state dir to exactly one of eight serves started together over a stale lock', async () => {
    const first = await serve();
    await stop(first, 'SIGKILL');
    expect(existsSync(join(state, 'serve.pid'))).toBe(true);
    const attempts = await Promise.all(
      Array.from({ length: 8 }, () =>
        startServe(['--state', state, '--log-level', 'warn']).then(
          (started) => {
            running.push(started);
            return 'ready';
          },
          (error: Error) => error.message,
        ),
      ),
    );
    expect(attempts.filter((attempt) => attempt === 'ready')).toHaveLength(1);
    for (const refusal of attempts.filter((attempt) => attempt !== 'ready')) {
      expect(refusal).toContain(`is using ${state}`);
    }
  });

  it('tightens the permissions of files already in the state dir at start', async () => {
    const first = await serve();
    await stop(first);
    chmodSync(join(state, 'wallet.mnemonic'), 0o644);
    chmodSync(join(state, 'sandbox.db'), 0o666);
    chmodSync(state, 0o755);
    await serve();
    expect(statSync(join(state, 'wallet.mnemonic')).mode & 0o777).toBe(0o600);
    expect(statSync(join(state, 'sandbox.db')).mode & 0o777).toBe(0o600);
    expect(statSync(state).mode & 0o777).toBe(0o700);
  });

  it('stops the anvil of a killed serve even when anvil.pid is gone', async () => {
    const first = await serve();
    const [anvilPid] = readFileSync(join(state, 'anvil.pid'), 'utf8').split(' ').map(Number);
    await stop(first, 'SIGKILL');
    rmSync(join(state, 'anvil.pid'));
    expect(isAlive(anvilPid as number)).toBe(true);
    await serve();
    expect(isAlive(anvilPid as number)).toBe(false);
  });
});

describe('acknowledged writes lost from sandbox.db', () => {
  /** A sandbox stopped cleanly once (its WAL folded into sandbox.db), then killed after writes. */
  async function killedAfterWrites(args: string[] = []) {
    const first = await serve({}, args);
    await registerOver(first.url);
    await stop(first);
    const second = await serve({}, args);
    const { apiKey } = await registerOver(second.url);
    const wallet = (await call(second.url, 'GET', '/api/v1/agent/wallet', undefined, apiKey)).body
      .agent_address as string;
    for (let i = 0; i < 3; i++) expect((await deposit(second.url, apiKey, 1)).status).toBe(200);
    await stop(second, 'SIGKILL');
    // Every write since the clean stop is in the write-ahead log alone.
    expect(statSync(join(state, 'sandbox.db-wal')).size).toBeGreaterThan(0);
    return wallet;
  }

  it('are noticed when sandbox.db-wal is deleted: index.db witnesses them, and serve refuses to start, naming it', async () => {
    await killedAfterWrites();
    const indexed = new DatabaseSync(join(state, 'index.db'), { readOnly: true });
    const { top } = indexed.prepare('SELECT MAX(number) AS top FROM blocks').get() as {
      top: number;
    };
    indexed.close();
    const wal = join(state, 'sandbox.db-wal');
    rmSync(wal);
    let result = await serveFailure(['--port', '0', '--state', state]);
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(
      /index\.db has indexed blocks up to \d+, with 3 vault transaction/,
    );
    expect(result.stderr).toContain(`${wal} deleted or damaged after a crash`);
    // The anvil the killed serve left running still holds the lost blocks: the refusal keeps
    // that copy rather than rolling it back to the shortened log.
    const [anvilPid, , anvilPort] = readFileSync(join(state, 'anvil.pid'), 'utf8')
      .trim()
      .split(' ')
      .map(Number);
    expect(isAlive(anvilPid as number)).toBe(true);
    const survivor = createPublicClient({ transport: http(`http://127.0.0.1:${anvilPort}`) });
    expect(Number(await survivor.getBlockNumber())).toBeGreaterThanOrEqual(Number(top));

    // The way on that the refusal names: without index.db, serve starts on the chain it has.
    const aside = join(dir, 'index-aside');
    mkdirSync(aside);
    for (const suffix of ['', '-wal', '-shm']) {
      const file = join(state, `index.db${suffix}`);
      if (existsSync(file)) copyFileSync(file, join(aside, `index.db${suffix}`));
      rmSync(file, { force: true });
    }
    const third = await serve();
    // Once that chain has grown past the old index's height (the same numbers, other blocks),
    // the old index still witnesses the loss: by the transactions its blocks lack.
    const { chain } = await reader(third.url);
    while (Number(await chain.getBlockNumber()) < Number(top)) {
      const advanced = await call(third.url, 'POST', '/sandbox/clock/advance', { seconds: 60 });
      expect(advanced.status).toBe(200);
    }
    await stop(third);
    for (const suffix of ['', '-wal', '-shm']) {
      rmSync(join(state, `index.db${suffix}`), { force: true });
      const kept = join(aside, `index.db${suffix}`);
      if (existsSync(kept)) copyFileSync(kept, join(state, `index.db${suffix}`));
    }
    result = await serveFailure(['--port', '0', '--state', state]);
    expect(result.code).toBe(1);
    expect(result.stderr).toContain(
      'index.db holds 3 vault transaction(s) that its blocks no longer have',
    );
    expect(result.stderr).toContain(`${wal} deleted or damaged`);
    // Serves and refusals one after another: a generous deadline on a loaded machine.
  }, 90_000);

  it('are noticed when sandbox.db-wal is damaged (64 bytes flipped), and serve refuses to start, naming it', async () => {
    await killedAfterWrites();
    // SQLite drops every frame of the log from the first damaged one on.
    const wal = join(state, 'sandbox.db-wal');
    const bytes = readFileSync(wal);
    const middle = Math.floor(bytes.length / 2);
    for (let i = middle; i < middle + 64; i++) bytes[i] = (bytes[i] as number) ^ 0xff;
    writeFileSync(wal, bytes);
    const result = await serveFailure(['--port', '0', '--state', state]);
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/index\.db has indexed blocks up to \d+/);
    expect(result.stderr).toContain(`${wal} deleted or damaged after a crash`);
  });

  it('never hand a new agent a wallet that has history on the chain', async () => {
    // Behind --rpc-url the chain outlives sandbox.db: the lost agent's wallet keeps its
    // funds and deposits there.
    const node = await startAnvil({ stateDir: dir });
    try {
      const args = ['--rpc-url', node.rpcUrl];
      const lost = await killedAfterWrites(args);
      rmSync(join(state, 'sandbox.db-wal'));
      const sandbox = await serve({}, args);
      const { apiKey } = await registerOver(sandbox.url);
      // Answered once the new agent is funded: never, were it given the lost agent's
      // wallet (the onboarding contract refuses an address twice).
      const answer = await call(sandbox.url, 'GET', '/api/v1/agent/wallet', undefined, apiKey);
      expect(answer.status).toBe(200);
      const wallet = answer.body.agent_address as string;
      expect(wallet).toMatch(/^0x[0-9a-fA-F]{40}$/);
      expect(wallet).not.toBe(lost);
      expect(sandbox.stderr()).toContain(`(${lost}) has history on the chain`);
      const positions = await fetch(`${sandbox.url}/v1/users/${wallet}/positions`);
      expect(((await positions.json()) as { positions: unknown[] }).positions).toEqual([]);
    } finally {
      await node.stop();
    }
  });
});
