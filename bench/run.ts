/**
 * `npm run bench`: start-up time, onchain write latency and throughput (with and without
 * --state persistence), and read throughput of the sandbox next to a bare node:http server
 * measured in the same run on the same machine. Figures are printed, never asserted.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';

const BIN = fileURLToPath(new URL('../bin/agentctl.js', import.meta.url));
const DURATION_SECONDS = Number(process.env.BENCH_DURATION ?? 5);
const CONNECTIONS = 10;
const REGISTRATIONS = Number(process.env.BENCH_REGISTRATIONS ?? 300);
const REGISTRATION_CONCURRENCY = 8;

const BARE_SERVER = `
const body = JSON.stringify({status:'ok',version:'0.0.0',chain_id:84532,chain_name:'Base Sepolia',rpc_connected:false});
const server = require('node:http').createServer((req, res) => {
  res.writeHead(200, {'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(body)});
  res.end(body);
});
server.listen(0, '127.0.0.1', () => console.log('listening on http://127.0.0.1:' + server.address().port));
`;

/** Starts a child that prints "listening on URL" and resolves with that URL. */
function startChild(args: string[]): Promise<{ url: string; child: ChildProcess }> {
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'inherit'] });
  return new Promise((resolve, reject) => {
    let out = '';
    child.stdout?.on('data', (chunk) => {
      out += chunk;
      const match = /listening on (http:\/\/\S+)/.exec(out);
      if (match?.[1]) resolve({ url: match[1], child });
    });
    child.on('exit', (code) => reject(new Error(`${args.join(' ')} exited with ${code}`)));
  });
}

async function load(url: string) {
  // One untimed second first, so every target is measured with a warm JIT.
  await autocannon({ url, connections: CONNECTIONS, duration: 1 });
  const result = await autocannon({
    url,
    connections: CONNECTIONS,
    duration: DURATION_SECONDS,
  });
  return {
    rps: Math.round(result.requests.average),
    p50: result.latency.p50,
    p99: result.latency.p99,
    non2xx: result.non2xx,
    errors: result.errors,
  };
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

async function registrationsPerSecond(base: string) {
  let next = 0;
  const started = performance.now();
  const worker = async () => {
    while (next++ < REGISTRATIONS) await registerOne(base);
  };
  await Promise.all(Array.from({ length: REGISTRATION_CONCURRENCY }, worker));
  const seconds = (performance.now() - started) / 1000;
  return { count: REGISTRATIONS, seconds, rate: REGISTRATIONS / seconds };
}

const SERVE_ARGS = [BIN, 'serve', '--port', '0', '--rate-limit', 'off', '--log-level', 'warn'];
const STARTS = 5;
const SEQUENTIAL_DEPOSITS = Number(process.env.BENCH_DEPOSITS ?? 100);
const CONCURRENT_AGENTS = 16;
const WRITES_PER_AGENT = Number(process.env.BENCH_WRITES_PER_AGENT ?? 10);

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? Number.NaN;
}

/** Median wall time from spawning `serve` to its ready line (anvil up, contracts deployed). */
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

function stop(child: ChildProcess): Promise<void> {
  return new Promise((resolve) => {
    child.removeAllListeners('exit');
    child.once('exit', () => resolve());
    child.kill('SIGTERM');
  });
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
const submitStrategy = (base: string, apiKey: string, i: number) =>
  post(base, apiKey, '/api/v1/agent/strategy/submit', {
    name: `Bench strategy ${i}`,
    description: 'A strategy submitted by the benchmark.',
  });

/** Latency of one agent's deposits (approve + deposit, confirmed), one after another. */
async function depositLatency(base: string) {
  const apiKey = await registerOne(base);
  await deposit(base, apiKey);
  const times: number[] = [];
  for (let i = 0; i < SEQUENTIAL_DEPOSITS; i++) {
    const started = performance.now();
    await deposit(base, apiKey);
    times.push(performance.now() - started);
  }
  times.sort((a, b) => a - b);
  return { p50: percentile(times, 50), p99: percentile(times, 99) };
}

/** Writes per second with CONCURRENT_AGENTS agents each writing WRITES_PER_AGENT times in a row. */
async function concurrentWrites(
  base: string,
  write: (base: string, apiKey: string, i: number) => Promise<void>,
) {
  const keys = await Promise.all(
    Array.from({ length: CONCURRENT_AGENTS }, () => registerOne(base)),
  );
  const started = performance.now();
  await Promise.all(
    keys.map(async (apiKey) => {
      for (let i = 0; i < WRITES_PER_AGENT; i++) await write(base, apiKey, i);
    }),
  );
  return (keys.length * WRITES_PER_AGENT) / ((performance.now() - started) / 1000);
}

const CLI_RUNS = Number(process.env.BENCH_CLI_RUNS ?? 15);

/** Median wall time of running `args` with node, start to exit. */
function medianRunMs(args: string[], env: NodeJS.ProcessEnv = process.env): number {
  const times: number[] = [];
  for (let i = 0; i < CLI_RUNS; i++) {
    const started = performance.now();
    const result = spawnSync(process.execPath, args, { env, stdio: ['ignore', 'ignore', 'pipe'] });
    times.push(performance.now() - started);
    if (result.status !== 0)
      throw new Error(`${args.join(' ')} exited ${result.status}: ${result.stderr}`);
  }
  return percentile(
    times.sort((a, b) => a - b),
    50,
  );
}

const stateDir = mkdtempSync(join(tmpdir(), 'agentctl-bench-'));
let stateRuns = 0;
const freshState = () => ['--state', join(stateDir, `run-${stateRuns++}`)];

console.log(
  `agentctl bench: node ${process.version}, ${cpus().length} CPUs, ${CONNECTIONS} connections, ${DURATION_SECONDS} s per load run\n`,
);
const startTemporary = await startupMs(() => []);
const startPersistent = await startupMs(freshState);
console.log(
  `serve start to ready (median of ${STARTS}): ${startTemporary.toFixed(0)} ms temporary, ` +
    `${startPersistent.toFixed(0)} ms with a new --state\n`,
);

const bare = await startChild(['-e', BARE_SERVER]);
const sandbox = await startChild(SERVE_ARGS);
const durable = await startChild([...SERVE_ARGS, ...freshState()]);

try {
  const bareNode = medianRunMs(['-e', '0']);
  const cliEnv = { ...process.env, AGENTCTL_CONFIG_DIR: join(stateDir, 'cli-config') };
  const cliRows: Array<[string, number]> = [
    ['agentctl --version', medianRunMs([BIN, '--version'], cliEnv)],
    ['agentctl --help', medianRunMs([BIN, '--help'], cliEnv)],
    [
      'agentctl vaults --json (warm serve)',
      medianRunMs([BIN, '--base-url', sandbox.url, 'vaults', '--json'], cliEnv),
    ],
  ];
  console.log(
    `command (median of ${CLI_RUNS})`.padEnd(52),
    'ms'.padStart(10),
    'vs node -e 0'.padStart(14),
  );
  console.log('node -e 0'.padEnd(52), bareNode.toFixed(1).padStart(10), '1.00x'.padStart(14));
  for (const [name, ms] of cliRows) {
    console.log(
      name.padEnd(52),
      ms.toFixed(1).padStart(10),
      `${(ms / bareNode).toFixed(2)}x`.padStart(14),
    );
  }
  console.log();

  const writeRows: Array<[string, number, number]> = [];
  const temporaryLatency = await depositLatency(sandbox.url);
  const durableLatency = await depositLatency(durable.url);
  const temporaryDeposits = await concurrentWrites(sandbox.url, deposit);
  const durableDeposits = await concurrentWrites(durable.url, deposit);
  const temporarySubmits = await concurrentWrites(sandbox.url, submitStrategy);
  const durableSubmits = await concurrentWrites(durable.url, submitStrategy);
  writeRows.push(
    ['deposit latency p50 (ms, 1 agent, sequential)', temporaryLatency.p50, durableLatency.p50],
    ['deposit latency p99 (ms, 1 agent, sequential)', temporaryLatency.p99, durableLatency.p99],
    [`deposits/s (${CONCURRENT_AGENTS} agents concurrently)`, temporaryDeposits, durableDeposits],
    [`strategy submissions/s (${CONCURRENT_AGENTS} agents)`, temporarySubmits, durableSubmits],
  );
  console.log('writes'.padEnd(52), 'temporary'.padStart(10), '--state'.padStart(10));
  for (const [name, temporary, persistent] of writeRows) {
    console.log(
      name.padEnd(52),
      temporary.toFixed(1).padStart(10),
      persistent.toFixed(1).padStart(10),
    );
  }
  const snapshotBytes = statSync(
    join(stateDir, `run-${stateRuns - 1}`, 'chain-snapshot.json'),
  ).size;
  console.log(
    `persistence cost per write: +${(durableLatency.p50 - temporaryLatency.p50).toFixed(1)} ms at p50 ` +
      `(a deposit is 2 transactions and 1 fsynced snapshot of ${(snapshotBytes / 1024).toFixed(0)} KiB)\n`,
  );

  const registrations = await registrationsPerSecond(sandbox.url);
  console.log(
    `registrations end to end (nonce, sign, register; ${REGISTRATION_CONCURRENCY} concurrent): ` +
      `${registrations.rate.toFixed(1)} /s (${registrations.count} in ${registrations.seconds.toFixed(2)} s)\n`,
  );

  const rows = [
    ['bare node:http, fixed JSON', await load(`${bare.url}/`)],
    ['serve GET /health', await load(`${sandbox.url}/health`)],
    [
      `serve GET /api/v1/agents (${REGISTRATIONS} agents, limit 50)`,
      await load(`${sandbox.url}/api/v1/agents`),
    ],
  ] as const;
  const bareRps = rows[0][1].rps;
  console.log(
    'endpoint'.padEnd(52),
    'req/s'.padStart(8),
    'vs bare'.padStart(8),
    'p50 ms'.padStart(7),
    'p99 ms'.padStart(7),
    'non-2xx'.padStart(8),
  );
  for (const [name, figures] of rows) {
    console.log(
      name.padEnd(52),
      String(figures.rps).padStart(8),
      `${((figures.rps / bareRps) * 100).toFixed(0)}%`.padStart(8),
      String(figures.p50).padStart(7),
      String(figures.p99).padStart(7),
      String(figures.non2xx + figures.errors).padStart(8),
    );
  }
} finally {
  await Promise.all([stop(sandbox.child), stop(durable.child), stop(bare.child)]);
  rmSync(stateDir, { recursive: true, force: true });
}
