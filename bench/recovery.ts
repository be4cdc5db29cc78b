/**
 * Recovery figures for `npm run bench`: how long writes stop after a kill -9 of serve (from
 * the new serve process's start) and after a kill of anvil (from the kill), while agents keep
 * depositing, with many blocks logged since the last checkpoint, next to the same with none.
 * Figures are printed by run.ts, never asserted.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';

export interface RecoveryOptions {
  /** bin/agentctl.js */
  bin: string;
  /** A new --state directory for the run. */
  stateDir: string;
  adminToken: string;
  /** Blocks logged since the last checkpoint at each kill. */
  blocks: number;
  /** Agents depositing one after another, each, throughout. */
  writers: number;
}

export interface RecoveryFigures {
  /** Blocks logged since the last checkpoint when serve, then anvil, was killed. */
  blocksAtServeKill: number;
  blocksAtAnvilKill: number;
  /** kill -9 of serve: from the new serve process's start to a write acknowledged, ms. */
  serveKillMs: number;
  /** …of which from the start to its ready line. */
  serveReadyMs: number;
  /** kill -9 of anvil: from the kill to a write acknowledged, ms (its standby takes over). */
  anvilKillMs: number;
  /** How many blocks the standby had yet to mine, read just before that kill. */
  standbyBehindAtKill: number;
  /** The peer: anvil and its standby killed together (the chain rebuilt), blocks and ms. */
  blocksAtBothKill: number;
  bothKillMs: number;
  /** The same with no block since the checkpoint and no writers. */
  serveKillEmptyLogMs: number;
  anvilKillEmptyLogMs: number;
  /** A graceful restart (SIGTERM), from the new process's start to a write acknowledged. */
  cleanRestartMs: number;
  /** Deposits acknowledged by the writers over the whole run, and answers other than 200/503. */
  acknowledged: number;
  unexpected: number;
}

interface Serve {
  url: string;
  child: ChildProcess;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Measures the figures on one --state sandbox; takes a few tens of seconds. */
export async function measureRecovery(options: RecoveryOptions): Promise<RecoveryFigures> {
  const env = {
    ...process.env,
    AGENTCTL_ADMIN_TOKEN: options.adminToken,
    // The log grows to `blocks` without a checkpoint cutting it back.
    AGENTCTL_CHECKPOINTS: 'manual',
  };
  const start = (): Promise<Serve> =>
    new Promise((resolve, reject) => {
      const child = spawn(
        process.execPath,
        [
          options.bin,
          'serve',
          '--port',
          '0',
          '--rate-limit',
          'off',
          '--log-level',
          'error',
          '--state',
          options.stateDir,
        ],
        { env, stdio: ['ignore', 'pipe', 'pipe'] },
      );
      // What serve says on stderr is passed on, except its shutdown notice: the bench stops it.
      child.stderr?.on('data', (chunk: Buffer) => {
        for (const line of String(chunk).split('\n')) {
          if (line && !/^SIG\w+ received, shutting down$/.test(line)) {
            process.stderr.write(`${line}\n`);
          }
        }
      });
      let out = '';
      child.stdout?.on('data', (chunk) => {
        out += chunk;
        const match = /listening on (http:\/\/\S+)/.exec(out);
        if (match?.[1]) resolve({ url: match[1], child });
      });
      child.on('exit', (code) => reject(new Error(`serve exited with ${code}`)));
    });
  const admin = { 'x-admin-token': options.adminToken };
  const json = async (url: string, init: RequestInit = {}) => {
    const response = await fetch(url, init);
    return { status: response.status, body: (await response.json()) as Record<string, unknown> };
  };
  const post = (url: string, key: string) =>
    json(`${url}/api/v1/agent/vault/deposit`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': key },
      body: JSON.stringify({ vault_id: 'moderate', amount_usdc: 1 }),
    }).then(
      (answer) => answer.status,
      () => 0,
    );
  const indexed = async (url: string) => {
    const info = await json(`${url}/sandbox/info`, { headers: admin });
    return Number((info.body.index as { block_number: number }).block_number);
  };
  /** Blocks the standby has yet to mine (the index follows the log's head); -1 without one. */
  const standbyBehind = async (url: string) => {
    const info = (await json(`${url}/sandbox/info`, { headers: admin })).body as {
      index: { block_number: number };
      standby: { status: string; block_number: number | null };
    };
    return info.standby.status === 'following'
      ? info.index.block_number - (info.standby.block_number ?? 0)
      : -1;
  };
  /** Until the standby follows the log within a few blocks of the index (writers go on). */
  const standbyCaughtUp = async (url: string) => {
    for (const deadline = performance.now() + 60_000; ; await sleep(50)) {
      const behind = await standbyBehind(url);
      if (behind >= 0 && behind <= 20) return;
      if (performance.now() > deadline) throw new Error('the standby did not catch up in 60 s');
    }
  };
  const checkpoint = async (url: string) =>
    Number(
      (await json(`${url}/sandbox/checkpoint`, { method: 'POST', headers: admin })).body
        .block_number,
    );

  let serve = await start();
  const keys: string[] = [];
  for (let i = 0; i <= options.writers; i++) keys.push(await register(serve.url));
  const [probe, ...writerKeys] = keys as [string, ...string[]];

  // The writers follow whichever serve is running; a write refused meanwhile is tried again.
  let writing = true;
  let acknowledged = 0;
  let unexpected = 0;
  const writers = writerKeys.map(async (key) => {
    while (writing) {
      const status = await post(serve.url, key);
      if (status === 200) acknowledged++;
      else {
        if (status !== 0 && status !== 503) unexpected++;
        await sleep(20);
      }
    }
  });
  /** Deposits as the probe agent until one is acknowledged; resolves with that moment. */
  const firstAcknowledged = async (url: () => string) => {
    while ((await post(url(), probe)) !== 200) await sleep(10);
    return performance.now();
  };
  const logGrowsTo = async (base: number) => {
    while ((await indexed(serve.url)) - base < options.blocks) await sleep(100);
    return (await indexed(serve.url)) - base;
  };

  try {
    // kill -9 of serve under load, the log `blocks` long.
    let base = await checkpoint(serve.url);
    const blocksAtServeKill = await logGrowsTo(base);
    const serveKill = await killServeAndRestart(serve, () => start());
    serve = serveKill.serve;
    const serveKillMs = (await firstAcknowledged(() => serve.url)) - serveKill.startedAt;

    // kill -9 of anvil under load, the log `blocks` long again.
    const blocksAtAnvilKill = await logGrowsTo(base);
    const standbyBehindAtKill = await standbyBehind(serve.url);
    let killedAt = killAnvils(options.stateDir, ['anvil.pid']);
    const anvilKillMs = (await firstAcknowledged(() => serve.url)) - killedAt;

    // The peer: anvil and its standby killed together, once the next standby has caught up
    // (its successor starts a second later): the chain is rebuilt from the checkpoint and log.
    await standbyCaughtUp(serve.url);
    const blocksAtBothKill = (await indexed(serve.url)) - base;
    killedAt = killAnvils(options.stateDir, ['anvil-standby.pid', 'anvil.pid']);
    const bothKillMs = (await firstAcknowledged(() => serve.url)) - killedAt;

    // The peers: no block since the checkpoint, no writers.
    writing = false;
    await Promise.all(writers);
    base = await checkpoint(serve.url);
    const emptyServeKill = await killServeAndRestart(serve, () => start());
    serve = emptyServeKill.serve;
    const serveKillEmptyLogMs =
      (await firstAcknowledged(() => serve.url)) - emptyServeKill.startedAt;
    await checkpoint(serve.url);
    killedAt = killAnvils(options.stateDir, ['anvil.pid']);
    const anvilKillEmptyLogMs = (await firstAcknowledged(() => serve.url)) - killedAt;

    await stopServe(serve.child, 'SIGTERM');
    const cleanStart = performance.now();
    serve = await start();
    const cleanRestartMs = (await firstAcknowledged(() => serve.url)) - cleanStart;

    return {
      blocksAtServeKill,
      blocksAtAnvilKill,
      serveKillMs,
      serveReadyMs: serveKill.readyAt - serveKill.startedAt,
      anvilKillMs,
      standbyBehindAtKill,
      blocksAtBothKill,
      bothKillMs,
      serveKillEmptyLogMs,
      anvilKillEmptyLogMs,
      cleanRestartMs,
      acknowledged,
      unexpected,
    };
  } finally {
    writing = false;
    await Promise.all(writers);
    await stopServe(serve.child, 'SIGTERM');
  }
}

async function killServeAndRestart(serve: Serve, restart: () => Promise<Serve>) {
  await stopServe(serve.child, 'SIGKILL');
  const startedAt = performance.now();
  const next = await restart();
  return { serve: next, startedAt, readyAt: performance.now() };
}

/** kill -9 of the anvils the state dir's pid files name, at once; returns the moment of it. */
function killAnvils(stateDir: string, pidFiles: string[]): number {
  const pids = pidFiles.map((file) =>
    Number(readFileSync(join(stateDir, file), 'utf8').split(' ')[0]),
  );
  for (const pid of pids) process.kill(pid, 'SIGKILL');
  return performance.now();
}

function stopServe(child: ChildProcess, signal: NodeJS.Signals): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    child.removeAllListeners('exit');
    child.once('exit', () => resolve());
    child.kill(signal);
  });
}

async function register(base: string): Promise<string> {
  const account = privateKeyToAccount(generatePrivateKey());
  const nonce = await fetch(`${base}/api/v1/agent/auth/nonce?wallet=${account.address}`);
  const { nonce: value, message } = (await nonce.json()) as { nonce: string; message: string };
  const response = await fetch(`${base}/api/v1/agent/auth/register`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      wallet_address: account.address,
      signature: await account.signMessage({ message }),
      nonce: value,
      agent_name: `Recovery ${account.address.slice(2, 10)}`,
      operator_address: account.address,
    }),
  });
  if (response.status !== 200) throw new Error(`register answered ${response.status}`);
  return ((await response.json()) as { api_key: string }).api_key;
}
