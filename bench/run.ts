/**
 * `npm run bench`: the sandbox's figures, each next to its peer measured in the same run on
 * the same machine (bare node:http, or a temporary sandbox without persistence), with the
 * target it is held to. Figures are printed, never asserted.
 *
 *   npm run bench               the full run (a few minutes)
 *   npm run bench -- --quick    a smaller run, under a minute
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gunzipSync } from 'node:zlib';
import autocannon from 'autocannon';
import { type Client, createClient } from 'graphql-ws';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { startAnvil } from '../src/sandbox/chain/anvil.ts';
import { measureCliStartup, printCliStartup } from './cli-startup.ts';
import {
  type BenchTools,
  depositsUnderSubscriptions,
  healthUnderErrorFlood,
  rssUnderDocumentFlood,
} from './graphql-hardening.ts';
import { measureInstallSize, printInstallSize } from './install-size.ts';
import { measureRecovery } from './recovery.ts';

const QUICK = process.argv.includes('--quick');
const BIN = fileURLToPath(new URL('../bin/agentctl.js', import.meta.url));
const DURATION_SECONDS = QUICK ? 2 : 5;
const CONNECTIONS = 10;
/** Agent counts at which the cost of persistence is measured; it must not grow between them. */
const SIZES = QUICK ? [300, 1000] : [300, 3000];
const REGISTRATION_CONCURRENCY = 8;
const SEQUENTIAL_DEPOSITS = QUICK ? 60 : 300;
const CONCURRENT_AGENTS = 16;
const WRITES_PER_AGENT = QUICK ? 5 : 10;
const STARTS = QUICK ? 3 : 5;
const CLI_RUNS = QUICK ? 5 : 15;
/** Vault transactions in the sandbox whose index is rebuilt. */
const REBUILD_TRANSACTIONS = QUICK ? 2000 : 10_000;
const ADMIN_TOKEN = 'bench-admin-token';
/** GraphQL subscribers connected while deposits are timed, one socket each. */
const SUBSCRIBERS = 100;
const SUBSCRIBED_DEPOSITS = QUICK ? 20 : 100;
/** Idle subscriptions whose memory is measured: SOCKETS sockets at the server's cap of 20 each. */
const IDLE_SOCKETS = QUICK ? 10 : 50;
const SUBSCRIPTIONS_PER_SOCKET = 20;
/** The GraphQL twin of GET /v1/vaults: every vault with its strategies. */
const VAULTS_QUERY = JSON.stringify({
  query:
    '{ vaults { address name symbol tvl tvlUsd totalShares pricePerShare apy { current day7 day30 inception } fees { management performance hurdle } riskLevel isERC7540 strategies { id name status allocation apy riskScore sharpeRatio maxDrawdown } } }',
});

const BARE_SERVER = `
const body = JSON.stringify({status:'ok',version:'0.0.0',chain_id:84532,chain_name:'Base Sepolia',rpc_connected:false});
const server = require('node:http').createServer((req, res) => {
  res.writeHead(200, {'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(body)});
  res.end(body);
});
server.listen(0, '127.0.0.1', () => console.log('listening on http://127.0.0.1:' + server.address().port));
`;

/**
 * Starts a child that prints "listening on URL" and resolves with that URL (and, started with
 * --inspect, its DevTools WebSocket, whose notices are kept off the bench's output).
 */
function startChild(
  args: string[],
): Promise<{ url: string; child: ChildProcess; inspector?: string }> {
  const child = spawn(process.execPath, args, {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, AGENTCTL_ADMIN_TOKEN: ADMIN_TOKEN },
  });
  let inspector: string | undefined;
  child.stderr?.on('data', (chunk: Buffer) => {
    for (const line of String(chunk).split('\n')) {
      const devtools = /^Debugger listening on (ws:\/\/\S+)/.exec(line);
      if (devtools) inspector = devtools[1];
      // serve's own shutdown notice is expected: the bench stops every sandbox it starts.
      else if (line && !/^(Debugger|For help, see)|^SIG\w+ received, shutting down$/.test(line)) {
        process.stderr.write(`${line}\n`);
      }
    }
  });
  return new Promise((resolve, reject) => {
    let out = '';
    child.stdout?.on('data', (chunk) => {
      out += chunk;
      const match = /listening on (http:\/\/\S+)/.exec(out);
      if (match?.[1]) resolve({ url: match[1], child, inspector });
    });
    child.on('exit', (code) => reject(new Error(`${args.join(' ')} exited with ${code}`)));
  });
}

function stop(child: ChildProcess): Promise<void> {
  return new Promise((resolve) => {
    child.removeAllListeners('exit');
    child.once('exit', () => resolve());
    child.kill('SIGTERM');
  });
}

async function load(url: string, request: Partial<autocannon.Options> = {}) {
  const options = { url, connections: CONNECTIONS, ...request };
  // One untimed second first, so every target is measured with a warm JIT.
  await autocannon({ ...options, duration: 1 });
  const result = await autocannon({ ...options, duration: DURATION_SECONDS });
  return {
    rps: Math.round(result.requests.average),
    p50: result.latency.p50,
    p99: result.latency.p99,
    non2xx: result.non2xx + result.errors,
  };
}

function percentile(sorted: number[], p: number): number {
  return (
    sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? Number.NaN
  );
}

async function registerOne(base: string): Promise<string> {
  const account = privateKeyToAccount(generatePrivateKey());
  const nonceResponse = await fetch(`${base}/api/v1/agent/auth/nonce?wallet=${account.address}`);
  const { nonce, message } = (await nonceResponse.json()) as { nonce: string; message: string };
  const response = await fetch(`${base}/api/v1/agent/auth/register`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      wallet_address: account.address,
      signature: await account.signMessage({ message }),
      nonce,
      agent_name: `Bench ${account.address.slice(2, 10)}`,
      operator_address: account.address,
    }),
  });
  if (response.status !== 200) throw new Error(`register answered ${response.status}`);
  return ((await response.json()) as { api_key: string }).api_key;
}

/** Registers until the sandbox holds `total` agents; returns the rate, end to end. */
async function registerUpTo(sandbox: Sandbox, total: number) {
  const count = total - sandbox.agents;
  let next = 0;
  const started = performance.now();
  const worker = async () => {
    while (next++ < count) sandbox.keys.push(await registerOne(sandbox.url));
  };
  await Promise.all(Array.from({ length: REGISTRATION_CONCURRENCY }, worker));
  const seconds = (performance.now() - started) / 1000;
  sandbox.agents = total;
  return { count, seconds, rate: count / seconds };
}

async function post(base: string, apiKey: string, path: string, body: object) {
  const response = await fetch(`${base}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': apiKey },
    body: JSON.stringify(body),
  });
  if (response.status !== 200) {
    throw new Error(`${path} answered ${response.status}: ${await response.text()}`);
  }
}

const deposit = (base: string, apiKey: string) =>
  post(base, apiKey, '/api/v1/agent/vault/deposit', { vault_id: 'moderate', amount_usdc: 1 });

async function getJson(url: string, headers: Record<string, string> = {}) {
  const response = await fetch(url, { headers });
  if (response.status !== 200) throw new Error(`${url} answered ${response.status}`);
  // biome-ignore lint/suspicious/noExplicitAny: bench reads a few known fields
  return (await response.json()) as any;
}

/** The data API index's own figures: how long writes waited to be indexed before answering. */
async function indexWait(sandbox: Sandbox) {
  const info = await getJson(`${sandbox.url}/sandbox/info`, { 'x-admin-token': ADMIN_TOKEN });
  return info.index as { write_wait_ms_p50: number; write_wait_ms_p99: number };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A graphql-ws client on a socket of its own, once the server has acknowledged connection_init. */
function connectClient(base: string): Promise<Client> {
  return new Promise((resolve, reject) => {
    const client = createClient({
      url: `${base.replace(/^http/, 'ws')}/graphql`,
      lazy: false,
      retryAttempts: 0,
      on: { connected: () => resolve(client) },
      onNonLazyError: reject,
    });
  });
}

/** Waits until the server counts exactly `count` subscriptions (subscribing is not acknowledged). */
async function subscriptionsReach(sandbox: Sandbox, count: number) {
  for (let tries = 0; tries < 500; tries++) {
    const info = await getJson(`${sandbox.url}/sandbox/info`, { 'x-admin-token': ADMIN_TOKEN });
    if (info.graphql.subscriptions === count) return;
    await sleep(20);
  }
  throw new Error(`the server never counted ${count} subscriptions`);
}

/**
 * From a deposit's acknowledgement to each of SUBSCRIBERS graphql-ws clients receiving its
 * transactionCreated, over SUBSCRIBED_DEPOSITS deposits one after another; negative when the
 * event came first (it is published when the index commits, which the answer waits for).
 * Also from the deposit's request, which bounds it from above. An event that has not come
 * 5 s after the acknowledgement is missed.
 */
async function eventLatency(sandbox: Sandbox, apiKey: string) {
  const arrivals = new Map<string, number[]>();
  let arrived = () => {};
  const clients = await Promise.all(
    Array.from({ length: SUBSCRIBERS }, () => connectClient(sandbox.url)),
  );
  for (const client of clients) {
    client.subscribe<{ transactionCreated: { hash: string } }>(
      { query: 'subscription { transactionCreated { hash type amount user timestamp } }' },
      {
        next: ({ data }) => {
          const hash = data?.transactionCreated.hash.toLowerCase() ?? '';
          const times = arrivals.get(hash) ?? [];
          times.push(performance.now());
          arrivals.set(hash, times);
          arrived();
        },
        error: (error) => console.error('subscriber error:', error),
        complete: () => {},
      },
    );
  }
  await subscriptionsReach(sandbox, SUBSCRIBERS);
  const fromAck: number[] = [];
  const fromRequest: number[] = [];
  let missed = 0;
  try {
    for (let i = 0; i < SUBSCRIBED_DEPOSITS; i++) {
      const requested = performance.now();
      const response = await fetch(`${sandbox.url}/api/v1/agent/vault/deposit`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-api-key': apiKey },
        body: JSON.stringify({ vault_id: 'moderate', amount_usdc: 1 }),
      });
      const body = (await response.json()) as { deposit_tx?: string };
      const acknowledged = performance.now();
      if (response.status !== 200 || !body.deposit_tx) {
        throw new Error(`deposit answered ${response.status}: ${JSON.stringify(body)}`);
      }
      const hash = body.deposit_tx.toLowerCase();
      const all = () => (arrivals.get(hash)?.length ?? 0) >= SUBSCRIBERS;
      if (!all()) {
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, 5000);
          arrived = () => {
            if (all()) {
              clearTimeout(timer);
              resolve();
            }
          };
        });
        arrived = () => {};
      }
      const times = arrivals.get(hash) ?? [];
      missed += SUBSCRIBERS - times.length;
      for (const time of times) {
        fromAck.push(time - acknowledged);
        fromRequest.push(time - requested);
      }
      arrivals.delete(hash);
    }
  } finally {
    await Promise.all(clients.map((client) => client.dispose()));
  }
  fromAck.sort((a, b) => a - b);
  fromRequest.sort((a, b) => a - b);
  return {
    fromAck: { p50: percentile(fromAck, 50), p99: percentile(fromAck, 99) },
    fromRequest: { p50: percentile(fromRequest, 50), p99: percentile(fromRequest, 99) },
    events: fromAck.length,
    early: fromAck.filter((ms) => ms < 0).length,
    missed,
  };
}

/** The Chrome DevTools protocol of a process started with --inspect, over its WebSocket. */
async function inspect(url: string) {
  const socket = new WebSocket(url);
  await new Promise((resolve, reject) => {
    socket.onopen = resolve;
    socket.onerror = reject;
  });
  let lastId = 0;
  const pending = new Map<
    number,
    (message: { result?: unknown; error?: { message: string } }) => void
  >();
  socket.onmessage = (event) => {
    const message = JSON.parse(String(event.data));
    pending.get(message.id)?.(message);
    pending.delete(message.id);
  };
  const call = (method: string, params: object = {}) =>
    new Promise<unknown>((resolve, reject) => {
      const id = ++lastId;
      pending.set(id, (message) =>
        message.error ? reject(new Error(message.error.message)) : resolve(message.result),
      );
      socket.send(JSON.stringify({ id, method, params }));
    });
  return {
    /** The JavaScript heap in use plus memory outside it (buffers), after a full collection. */
    async liveBytes(): Promise<number> {
      await call('HeapProfiler.collectGarbage');
      await call('HeapProfiler.collectGarbage');
      const answer = (await call('Runtime.evaluate', {
        expression: 'JSON.stringify(process.memoryUsage())',
        returnByValue: true,
      })) as { result: { value: string } };
      const usage = JSON.parse(answer.result.value) as { heapUsed: number; external: number };
      return usage.heapUsed + usage.external;
    },
    close: () => socket.close(),
  };
}

/**
 * Memory of idle GraphQL sockets and subscriptions, in a serve of their own started with
 * --inspect: what the process holds after a full collection, before and after IDLE_SOCKETS
 * sockets connect, then after each holds SUBSCRIPTIONS_PER_SOCKET subscriptions spread over
 * every vault's topics (vaultUpdated and transactionCreated, alternately). A first round,
 * not measured, opens and closes the same set, so that code compiled once is not counted.
 */
async function idleMemory() {
  const { url, child, inspector } = await startChild(['--inspect=127.0.0.1:0', ...SERVE_ARGS]);
  const sandbox: Sandbox = { url, child, keys: [], agents: 0 };
  const devtools = await inspect(inspector as string);
  const subscriptions = IDLE_SOCKETS * SUBSCRIPTIONS_PER_SOCKET;
  const sink = { next: () => {}, error: () => {}, complete: () => {} };
  try {
    const vaults = ((await getJson(`${url}/v1/vaults`)).vaults as Array<{ address: string }>).map(
      (vault) => vault.address,
    );
    const round = async () => {
      await subscriptionsReach(sandbox, 0);
      const before = await devtools.liveBytes();
      const clients = await Promise.all(
        Array.from({ length: IDLE_SOCKETS }, () => connectClient(url)),
      );
      const connected = await devtools.liveBytes();
      clients.forEach((client, c) => {
        for (let i = 0; i < SUBSCRIPTIONS_PER_SOCKET; i++) {
          const address = vaults[(c + i) % vaults.length];
          client.subscribe(
            i % 2 === 0
              ? { query: `subscription { vaultUpdated(address: "${address}") { tvl } }` }
              : {
                  query: `subscription { transactionCreated(vaultAddress: "${address}") { hash } }`,
                },
            sink,
          );
        }
      });
      await subscriptionsReach(sandbox, subscriptions);
      const subscribed = await devtools.liveBytes();
      await Promise.all(clients.map((client) => client.dispose()));
      return {
        perSocket: (connected - before) / IDLE_SOCKETS,
        perSubscription: (subscribed - connected) / subscriptions,
      };
    };
    await round();
    return { ...(await round()), subscriptions };
  } finally {
    devtools.close();
    await stop(child);
  }
}

/**
 * Deposits until the index holds `total` vault transactions, from CONCURRENT_AGENTS agents at
 * once; returns how many there are.
 */
async function depositUntil(sandbox: Sandbox, total: number): Promise<number> {
  const count = async () =>
    Number((await getJson(`${sandbox.url}/v1/protocol/stats`)).transactions);
  let have = await count();
  const keys = sandbox.keys.slice(0, CONCURRENT_AGENTS);
  while (have < total) {
    const each = Math.ceil((total - have) / keys.length);
    await Promise.all(
      keys.map(async (apiKey) => {
        for (let i = 0; i < each; i++) await deposit(sandbox.url, apiKey);
      }),
    );
    have = await count();
  }
  return have;
}

/** Latency of one agent's deposits (approve + deposit, durable when answered), one after another. */
async function depositLatency(sandbox: Sandbox, agentIndex: number) {
  const apiKey = sandbox.keys[agentIndex] as string;
  await deposit(sandbox.url, apiKey);
  const times: number[] = [];
  for (let i = 0; i < SEQUENTIAL_DEPOSITS; i++) {
    const started = performance.now();
    await deposit(sandbox.url, apiKey);
    times.push(performance.now() - started);
  }
  times.sort((a, b) => a - b);
  return { p50: percentile(times, 50), p99: percentile(times, 99) };
}

/**
 * anvil's own share of a write: the median time it takes to mine an empty block on a copy of
 * the sandbox's chain, started as serve starts its anvil. anvil 1.7 recomputes the state root
 * over every account and storage slot for each block it mines, so this grows with the agents
 * on the chain; what a deposit takes beyond it is serve's.
 */
async function emptyBlockMs(sandbox: Sandbox): Promise<number> {
  const info = await getJson(`${sandbox.url}/sandbox/info`, { 'x-admin-token': ADMIN_TOKEN });
  const rpc = async (url: string, method: string) => {
    const response = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params: [] }),
    });
    const body = (await response.json()) as { result?: string; error?: unknown };
    if (body.error !== undefined) throw new Error(`${method}: ${JSON.stringify(body.error)}`);
    return body.result as string;
  };
  const dump = await rpc(info.rpc_url, 'anvil_dumpState');
  const dir = mkdtempSync(join(stateRoot, 'anvil-copy-'));
  const file = join(dir, 'state.json');
  writeFileSync(file, gunzipSync(Buffer.from(dump.slice(2), 'hex')));
  const anvil = await startAnvil({ stateDir: dir, mining: 'manual', loadState: file });
  try {
    await rpc(anvil.rpcUrl, 'evm_mine');
    const times: number[] = [];
    for (let i = 0; i < 31; i++) {
      const started = performance.now();
      await rpc(anvil.rpcUrl, 'evm_mine');
      times.push(performance.now() - started);
    }
    return percentile(
      times.sort((a, b) => a - b),
      50,
    );
  } finally {
    await anvil.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Deposits per second with CONCURRENT_AGENTS agents each depositing WRITES_PER_AGENT times in a row. */
async function concurrentDeposits(sandbox: Sandbox) {
  const keys = sandbox.keys.slice(0, CONCURRENT_AGENTS);
  const started = performance.now();
  await Promise.all(
    keys.map(async (apiKey) => {
      for (let i = 0; i < WRITES_PER_AGENT; i++) await deposit(sandbox.url, apiKey);
    }),
  );
  return (keys.length * WRITES_PER_AGENT) / ((performance.now() - started) / 1000);
}

/** Median wall time from spawning `serve` to its ready line. */
async function startupMs(extraArgs: () => string[]) {
  const times: number[] = [];
  for (let i = 0; i < STARTS; i++) {
    const started = performance.now();
    const serve = await startChild([...SERVE_ARGS, ...extraArgs()]);
    times.push(performance.now() - started);
    await stop(serve.child);
  }
  return percentile(
    times.sort((a, b) => a - b),
    50,
  );
}

interface Sandbox {
  url: string;
  child: ChildProcess;
  keys: string[];
  agents: number;
  dir?: string;
}

/** Size of what a --state sandbox keeps on disk: the database (with its log) and the checkpoint. */
function stateBytes(dir: string | undefined): string {
  if (!dir) return '';
  const size = (path: string) => {
    try {
      return statSync(path).size;
    } catch {
      return 0;
    }
  };
  const db = size(join(dir, 'sandbox.db')) + size(join(dir, 'sandbox.db-wal'));
  const chain = join(dir, 'chain');
  let checkpoint = 0;
  try {
    for (const name of readdirSync(chain)) checkpoint += size(join(chain, name));
  } catch {
    // No checkpoint yet: the genesis is the checkpoint.
  }
  return `database ${(db / 1024 / 1024).toFixed(1)} MiB, checkpoint ${(checkpoint / 1024 / 1024).toFixed(1)} MiB`;
}

const SERVE_ARGS = [BIN, 'serve', '--port', '0', '--rate-limit', 'off', '--log-level', 'warn'];
const stateRoot = mkdtempSync(join(tmpdir(), 'agentctl-bench-'));
let stateRuns = 0;
const freshState = () => ['--state', join(stateRoot, `run-${stateRuns++}`)];
const fmt = (n: number, digits = 1) => n.toFixed(digits).padStart(10);
const row = (name: string, ...cells: string[]) => console.log(name.padEnd(58), ...cells);

console.log(
  `agentctl bench${QUICK ? ' --quick' : ''}: node ${process.version}, ${cpus().length} CPUs, ` +
    `${CONNECTIONS} connections, ${DURATION_SECONDS} s per load run\n`,
);

printInstallSize(measureInstallSize(), row);
console.log();

const startTemporary = await startupMs(() => []);
const startPersistent = await startupMs(freshState);
row(
  `serve start to ready (median of ${STARTS})`,
  'temporary'.padStart(10),
  '--state'.padStart(10),
  'target'.padStart(10),
);
row('  ms', fmt(startTemporary, 0), fmt(startPersistent, 0), '≤ 500'.padStart(10));
console.log();

const bare = await startChild(['-e', BARE_SERVER]);
const temporary: Sandbox = { ...(await startChild(SERVE_ARGS)), keys: [], agents: 0 };
const durableArgs = freshState();
const durable: Sandbox = {
  ...(await startChild([...SERVE_ARGS, ...durableArgs])),
  keys: [],
  agents: 0,
  dir: durableArgs[1],
};

try {
  printCliStartup(measureCliStartup(temporary.url, CLI_RUNS), CLI_RUNS, row);
  console.log();

  const [small, large] = SIZES as [number, number];
  const registrations = await registerUpTo(durable, small);
  await registerUpTo(temporary, small);

  const latency = [] as Array<{
    size: number;
    temporary: Awaited<ReturnType<typeof depositLatency>>;
    durable: Awaited<ReturnType<typeof depositLatency>>;
    disk: string;
    emptyBlock: number;
  }>;
  latency.push({
    size: small,
    temporary: await depositLatency(temporary, small - 1),
    durable: await depositLatency(durable, small - 1),
    disk: stateBytes(durable.dir),
    emptyBlock: await emptyBlockMs(durable),
  });
  const indexWaitSmall = await indexWait(durable);
  const temporaryDeposits = await concurrentDeposits(temporary);
  const durableDeposits = await concurrentDeposits(durable);
  const busyAgentKey = durable.keys[small - 1] as string;
  const busyAgent = (
    await getJson(`${durable.url}/api/v1/agent/wallet`, { 'x-api-key': busyAgentKey })
  ).agent_address as string;
  const busyAgentTxs = (await getJson(`${durable.url}/v1/users/${busyAgent}/transactions?limit=1`))
    .total as number;
  const leaderboardAgents = durable.agents;
  // Reads are measured on a settled sandbox: the write bursts above leave work (garbage
  // collection, anvil's own housekeeping) that would otherwise be counted against them.
  await new Promise((resolve) => setTimeout(resolve, 3000));
  const reads = [
    ['bare node:http, fixed JSON', await load(`${bare.url}/`)],
    ['serve GET /health', await load(`${durable.url}/health`)],
    [
      `serve GET /api/v1/agents (${leaderboardAgents} agents, limit 50)`,
      await load(`${durable.url}/api/v1/agents`),
    ],
    ['serve GET /v1/vaults', await load(`${durable.url}/v1/vaults`)],
    [
      'serve POST /graphql { vaults { … strategies { … } } }',
      await load(`${durable.url}/graphql`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: VAULTS_QUERY,
      }),
    ],
    [
      `serve GET /v1/users/:address/transactions (${busyAgentTxs} txs, limit 50)`,
      await load(`${durable.url}/v1/users/${busyAgent}/transactions`),
    ],
  ] as const;

  const grown = await registerUpTo(durable, large);
  await registerUpTo(temporary, large);
  latency.push({
    size: large,
    temporary: await depositLatency(temporary, large - 1),
    durable: await depositLatency(durable, large - 1),
    disk: stateBytes(durable.dir),
    emptyBlock: await emptyBlockMs(durable),
  });

  const indexWaitLarge = await indexWait(durable);

  // The index rebuilt from the chain: the same sandbox started with and without index.db.
  const transactions = await depositUntil(durable, REBUILD_TRANSACTIONS);
  await stop(durable.child);
  const restart = async () => {
    const started = performance.now();
    const serve = await startChild([...SERVE_ARGS, ...durableArgs]);
    const ms = performance.now() - started;
    const indexed = Number((await getJson(`${serve.url}/v1/protocol/stats`)).transactions);
    await stop(serve.child);
    return { ms, indexed };
  };
  const withIndex = await restart();
  for (const suffix of ['', '-wal', '-shm']) {
    rmSync(join(durable.dir as string, `index.db${suffix}`), { force: true });
  }
  const rebuilt = await restart();
  const afterRebuild = await restart();
  Object.assign(durable, await startChild([...SERVE_ARGS, ...durableArgs]));
  const recovery = await measureRecovery({
    bin: BIN,
    stateDir: freshState()[1] as string,
    adminToken: ADMIN_TOKEN,
    blocks: QUICK ? 200 : 1000,
    writers: 6,
  });

  const events = await eventLatency(temporary, temporary.keys[0] as string);
  const memory = await idleMemory();

  row(
    `registrations end to end, --state (nonce, sign, register; ${REGISTRATION_CONCURRENCY} concurrent)`,
  );
  row(`  first ${registrations.count}, per second`, fmt(registrations.rate), '≥ 500'.padStart(10));
  row(`  next ${grown.count}, per second`, fmt(grown.rate), '≥ 500'.padStart(10));
  console.log();

  row(
    `writes (${SEQUENTIAL_DEPOSITS} sequential deposits by one agent)`,
    'temporary'.padStart(10),
    '--state'.padStart(10),
    'cost'.padStart(10),
    'target'.padStart(10),
  );
  for (const { size, temporary: t, durable: d, disk, emptyBlock } of latency) {
    row(
      `deposit p50 ms, ${size} agents`,
      fmt(t.p50),
      fmt(d.p50),
      fmt(d.p50 - t.p50),
      '≤ 25, +5'.padStart(10),
    );
    row(
      `deposit p99 ms, ${size} agents`,
      fmt(t.p99),
      fmt(d.p99),
      fmt(d.p99 - t.p99),
      '≤ 100'.padStart(10),
    );
    row(`  of which anvil, mining an empty block, ms`, ''.padStart(10), fmt(emptyBlock));
    row(`  --state on disk at ${size} agents: ${disk}`);
  }
  for (const [size, wait] of [
    [small, indexWaitSmall],
    [large, indexWaitLarge],
  ] as const) {
    row(
      `  writes waiting for the data API index, p50 / p99 ms, ${size} agents`,
      ''.padStart(10),
      fmt(wait.write_wait_ms_p50, 2),
      fmt(wait.write_wait_ms_p99, 2),
    );
  }
  row(
    `deposits/s (${CONCURRENT_AGENTS} agents × ${WRITES_PER_AGENT}, concurrently)`,
    fmt(temporaryDeposits),
    fmt(durableDeposits),
    ''.padStart(10),
    '≥ 150'.padStart(10),
  );
  console.log();

  const bareRps = reads[0][1].rps;
  row(
    'endpoint',
    'req/s'.padStart(8),
    'vs bare'.padStart(8),
    'p50 ms'.padStart(7),
    'p99 ms'.padStart(7),
    'non-2xx'.padStart(8),
    'target'.padStart(8),
  );
  for (const [name, figures] of reads) {
    row(
      name,
      String(figures.rps).padStart(8),
      `${((figures.rps / bareRps) * 100).toFixed(0)}%`.padStart(8),
      String(figures.p50).padStart(7),
      String(figures.p99).padStart(7),
      String(figures.non2xx).padStart(8),
      (name.includes('agents (') ? '≥ 60%' : '').padStart(8),
    );
  }
  console.log();

  row(`data API index rebuilt from the chain (${transactions} vault transactions, --state)`);
  row('  serve start to ready, index.db kept, ms', fmt(withIndex.ms, 0));
  row('  serve start to ready, index.db deleted (rebuilt before ready), ms', fmt(rebuilt.ms, 0));
  row('  rebuild, ms (the difference)', fmt(rebuilt.ms - withIndex.ms, 0));
  row(
    '  transactions indexed: before / rebuilt / next start',
    `${withIndex.indexed} / ${rebuilt.indexed} / ${afterRebuild.indexed}`.padStart(22),
  );
  console.log();

  row(
    'recovery: kill -9 to a write acknowledged again, ms (--state)',
    `${recovery.blocksAtServeKill} blk`.padStart(10),
    '0 blk'.padStart(10),
    'target'.padStart(10),
  );
  row(
    '  serve killed, 6 agents writing: from the new serve start',
    fmt(recovery.serveKillMs, 0),
    fmt(recovery.serveKillEmptyLogMs, 0),
    '≤ 2000'.padStart(10),
  );
  row('    of which to its ready line', fmt(recovery.serveReadyMs, 0));
  row(
    `  anvil killed (${recovery.blocksAtAnvilKill} blk since the checkpoint): from the kill`,
    fmt(recovery.anvilKillMs, 0),
    fmt(recovery.anvilKillEmptyLogMs, 0),
    '≤ 2000'.padStart(10),
  );
  row(
    `    its standby takes over (${recovery.standbyBehindAtKill} blk behind at the kill); at 0 blk, with no block logged yet, there is none`,
  );
  row(
    `  peer: anvil and its standby killed together (${recovery.blocksAtBothKill} blk): rebuilt`,
    fmt(recovery.bothKillMs, 0),
  );
  row('  peer: graceful restart, from the new serve start', fmt(recovery.cleanRestartMs, 0));
  row(
    `  writes acknowledged meanwhile ${recovery.acknowledged}, answered other than 200/503 ${recovery.unexpected}`,
  );
  console.log();

  row(
    `GraphQL subscriptions (${SUBSCRIBERS} transactionCreated subscribers, one socket each)`,
    'p50'.padStart(10),
    'p99'.padStart(10),
    'target'.padStart(10),
  );
  row(
    `  deposit acknowledged to event received, ms (${SUBSCRIBED_DEPOSITS} deposits; < 0: event first)`,
    fmt(events.fromAck.p50, 2),
    fmt(events.fromAck.p99, 2),
    '≤ 1000'.padStart(10),
  );
  row(
    '  deposit requested to event received, ms',
    fmt(events.fromRequest.p50),
    fmt(events.fromRequest.p99),
  );
  row(
    `  events received ${events.events} (${events.early} before the acknowledgement), missed ${events.missed}`,
  );
  row(
    `idle GraphQL memory (${IDLE_SOCKETS} sockets × ${SUBSCRIPTIONS_PER_SOCKET} subscriptions; heap + external after GC)`,
    'KiB'.padStart(10),
  );
  row('  per socket (connection_init acknowledged)', fmt(memory.perSocket / 1024, 2));
  row(`  per subscription (${memory.subscriptions} in all)`, fmt(memory.perSubscription / 1024, 2));
  console.log();

  // /graphql under hostile load (bench/graphql-hardening.ts), each in a serve of its own.
  const tools: BenchTools = {
    startServe: (args) => startChild([BIN, 'serve', '--port', '0', ...args]),
    stop,
    registerAgent: registerOne,
    adminToken: ADMIN_TOKEN,
    quick: QUICK,
  };
  const fanOut = await depositsUnderSubscriptions(tools);
  row(
    `deposit latency, ms (one agent, one after another)`,
    'p50'.padStart(10),
    'p99'.padStart(10),
    'target'.padStart(10),
  );
  row('  no subscription', fmt(fanOut.none.p50), fmt(fanOut.none.p99));
  row(
    `  ${fanOut.subscriptions} idle subscriptions (on another vault's topics, no event for them)`,
    fmt(fanOut.elsewhere.p50),
    fmt(fanOut.elsewhere.p99),
    `≤ ${(2 * fanOut.none.p50).toFixed(0)} p50`.padStart(10),
  );
  row(
    `  ${fanOut.subscriptions} on its topics (${fanOut.distinct} distinct, ${fanOut.eventsPerDeposit.toFixed(0)} events, ~2 KB each, a deposit)`,
    fmt(fanOut.subscribed.p50),
    fmt(fanOut.subscribed.p99),
    '(800-1,200 before)'.padStart(10),
  );
  const flood = await rssUnderDocumentFlood(tools);
  row(
    `serve RSS, MiB (${flood.sent} unique 16 KiB documents in ${flood.seconds} s, node tier; ${flood.refused} refused)`,
    'before'.padStart(10),
    'peak'.padStart(10),
    'end'.padStart(10),
    '10 s after'.padStart(10),
    'target'.padStart(10),
  );
  row(
    '',
    fmt(flood.before, 0),
    fmt(flood.peak, 0),
    fmt(flood.end, 0),
    fmt(flood.after, 0),
    '< 512'.padStart(10),
  );
  const errors = await healthUnderErrorFlood(tools);
  row(
    `GET /health latency, ms (${errors.seconds} s each)`,
    'p50'.padStart(10),
    'p99'.padStart(10),
    'target'.padStart(10),
  );
  row('  idle', fmt(errors.idle.p50), fmt(errors.idle.p99));
  row(
    `  one agent key sending 100-error documents at 300/min (${errors.sent} sent, ${errors.refused} refused)`,
    fmt(errors.loaded.p50),
    fmt(errors.loaded.p99),
    '≈ 50 p99'.padStart(10),
  );
  row(
    '  each of those documents, answered in',
    fmt(errors.documents.p50),
    fmt(errors.documents.p99),
  );
} finally {
  await Promise.all([stop(temporary.child), stop(durable.child), stop(bare.child)]);
  rmSync(stateRoot, { recursive: true, force: true });
}
