/**
 * `npm run bench`: the sandbox's figures, each next to its peer measured in the same run on
 * the same machine (bare node:http, or a temporary sandbox without persistence), with the
 * target it is held to. Figures are printed, never asserted.
 *
 *   npm run bench               the full run (a few minutes)
 *   npm run bench -- --quick    a smaller run, under a minute
 *
 * Some sections also run alone, in a sandbox of their own (after `npm run build:dist`):
 * `node bench/reads.ts`, `node bench/events.ts`, `node bench/cli-startup.ts`,
 * `node bench/install-size.ts`, `node bench/idempotency.ts`, `node bench/team.ts` (which needs
 * PostgreSQL's server binaries, as the tests do), each with `--quick`.
 */
import { mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import { startAnvil } from '../src/sandbox/chain/anvil.ts';
import { measureCliStartup, printCliStartup } from './cli-startup.ts';
import {
  ADMIN_TOKEN,
  BIN,
  deposit,
  fewSamples,
  fmt,
  getJson,
  percentile,
  RATE_LIMITED_SERVE_ARGS,
  registerUpTo as registerAgentsUpTo,
  registerOne,
  row,
  type Sandbox,
  SERVE_ARGS,
  startChild,
  stop,
} from './common.ts';
import { connectClient, eventLatency, printEventLatency, subscriptionsReach } from './events.ts';
import {
  type BenchTools,
  depositsUnderSubscriptions,
  healthUnderErrorFlood,
  rssUnderDocumentFlood,
} from './graphql-hardening.ts';
import { measureIdempotency, printIdempotency } from './idempotency.ts';
import { measureInstallSize, printInstallSize } from './install-size.ts';
import {
  BARE_SERVER,
  CONNECTIONS,
  measureRateLimitedReads,
  measureReads,
  printReads,
  readsSandbox,
} from './reads.ts';
import { measureRecovery } from './recovery.ts';
import { admin, measureSnapshots, printSnapshots, type SnapshotFigures } from './snapshots.ts';
import { measureTeam, printTeam, teamSizes } from './team.ts';

const QUICK = process.argv.includes('--quick');
const DURATION_SECONDS = QUICK ? 2 : 5;
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
const SUBSCRIBED_DEPOSITS = QUICK ? 20 : 100;
/** Idle subscriptions whose memory is measured: SOCKETS sockets at the server's cap of 20 each. */
const IDLE_SOCKETS = QUICK ? 10 : 50;
const SUBSCRIPTIONS_PER_SOCKET = 20;
/** The index keeps its last 1,024 writes' waits (src/sandbox/indexer/indexer.ts WAIT_SAMPLES). */
const INDEX_WAIT_SAMPLES = 1024;

const registerUpTo = (sandbox: Sandbox, total: number) =>
  registerAgentsUpTo(sandbox, total, REGISTRATION_CONCURRENCY);

/** The data API index's own figures: how long writes waited to be indexed before answering. */
async function indexWait(sandbox: Sandbox) {
  const info = await getJson(`${sandbox.url}/sandbox/info`, { 'x-admin-token': ADMIN_TOKEN });
  return info.index as {
    writes_indexed: number;
    write_wait_ms_p50: number;
    write_wait_ms_p99: number;
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
  const devtools = await inspect(inspector as string);
  const subscriptions = IDLE_SOCKETS * SUBSCRIPTIONS_PER_SOCKET;
  const sink = { next: () => {}, error: () => {}, complete: () => {} };
  try {
    const vaults = ((await getJson(`${url}/v1/vaults`)).vaults as Array<{ address: string }>).map(
      (vault) => vault.address,
    );
    const round = async () => {
      await subscriptionsReach(url, 0);
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
      await subscriptionsReach(url, subscriptions);
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
  return { p50: percentile(times, 50), p99: percentile(times, 99), samples: times.length };
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

const stateRoot = mkdtempSync(join(tmpdir(), 'agentctl-bench-'));
let stateRuns = 0;
const freshState = () => ['--state', join(stateRoot, `run-${stateRuns++}`)];

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
  // Keyed next to unkeyed, by an agent of its own (the one before the sequential deposits').
  // Its 600 deposits are undone afterwards (a snapshot restored), so that every section after
  // it measures the same sandbox as in runs before it existed.
  await admin(durable.url, 'POST', '/sandbox/snapshots', { name: 'before-keys', replace: true });
  const idempotency = await measureIdempotency(
    durable.url,
    durable.keys[small - 2] as string,
    SEQUENTIAL_DEPOSITS,
  );
  await admin(durable.url, 'POST', '/sandbox/snapshots/before-keys/restore');
  await admin(durable.url, 'DELETE', '/sandbox/snapshots/before-keys');
  const snapshots: SnapshotFigures[] = [await measureSnapshots(durable)];
  const temporaryDeposits = await concurrentDeposits(temporary);
  const durableDeposits = await concurrentDeposits(durable);
  // The agents that have deposited so far, the busiest (the sequential deposits') first.
  const readsOn = await readsSandbox(durable.url, durable.keys, [
    durable.keys[small - 1] as string,
    ...durable.keys.slice(0, CONCURRENT_AGENTS),
  ]);
  // Reads are measured on a settled sandbox: the write bursts above leave work (garbage
  // collection, anvil's own housekeeping) that would otherwise be counted against them.
  await new Promise((resolve) => setTimeout(resolve, 3000));
  const reads = await measureReads(readsOn, bare.url, durable.agents, DURATION_SECONDS);

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
  snapshots.push(await measureSnapshots(durable));

  // The index rebuilt from the chain: the same sandbox started with and without index.db.
  const transactions = await depositUntil(durable, REBUILD_TRANSACTIONS);
  await stop(durable.child);
  // The same sandbox with the spec's default rate limits (the keys are kept in --state).
  const limited = await startChild([...RATE_LIMITED_SERVE_ARGS, ...durableArgs]);
  reads.push(...(await measureRateLimitedReads(limited.url, durable.keys, DURATION_SECONDS)));
  await stop(limited.child);
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

  const events = await eventLatency(durable.url, durable.keys[0] as string, SUBSCRIBED_DEPOSITS);
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
      `deposit p99 ms, ${size} agents${fewSamples(d.samples)}`,
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
      `  writes waiting for the data API index, p50 / p99 ms, ${size} agents${fewSamples(Math.min(wait.writes_indexed, INDEX_WAIT_SAMPLES))}`,
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

  printIdempotency(idempotency, row);
  console.log();

  printReads(reads, row);
  console.log();

  printSnapshots(
    snapshots,
    {
      serveStartMs: startPersistent,
      registrationsPerSecond:
        (registrations.count + grown.count) / (registrations.seconds + grown.seconds),
    },
    row,
  );
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

  printEventLatency(events, row);
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
  row(
    `  no subscription${fewSamples(fanOut.none.samples)}`,
    fmt(fanOut.none.p50),
    fmt(fanOut.none.p99),
  );
  row(
    `  ${fanOut.subscriptions} idle subscriptions (on another vault's topics, no event for them)${fewSamples(fanOut.elsewhere.samples)}`,
    fmt(fanOut.elsewhere.p50),
    fmt(fanOut.elsewhere.p99),
    `≤ ${(2 * fanOut.none.p50).toFixed(0)} p50`.padStart(10),
  );
  row(
    `  ${fanOut.subscriptions} on its topics (${fanOut.distinct} distinct, ${fanOut.eventsPerDeposit.toFixed(0)} events, ~2 KB each, a deposit)${fewSamples(fanOut.subscribed.samples)}`,
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
  row(`  idle${fewSamples(errors.idle.samples)}`, fmt(errors.idle.p50), fmt(errors.idle.p99));
  row(
    `  one agent key sending 100-error documents at 300/min (${errors.sent} sent, ${errors.refused} refused)${fewSamples(errors.loaded.samples)}`,
    fmt(errors.loaded.p50),
    fmt(errors.loaded.p99),
    '≈ 50 p99'.padStart(10),
  );
  row(
    `  each of those documents, answered in${fewSamples(errors.documents.samples)}`,
    fmt(errors.documents.p50),
    fmt(errors.documents.p99),
  );
  console.log();

  // The team sandbox (issue 25): serves of its own on a PostgreSQL cluster of its own.
  printTeam(await measureTeam(teamSizes(QUICK)), row);
} finally {
  await Promise.all([stop(temporary.child), stop(durable.child), stop(bare.child)]);
  rmSync(stateRoot, { recursive: true, force: true });
}
