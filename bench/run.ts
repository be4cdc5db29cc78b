/**
 * `npm run bench`: throughput of the sandbox service, next to a bare node:http server
 * measured in the same run on the same machine. Figures are printed, never asserted.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { cpus } from 'node:os';
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

async function registerOne(base: string): Promise<void> {
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

const bare = await startChild(['-e', BARE_SERVER]);
const sandbox = await startChild([
  BIN,
  'serve',
  '--port',
  '0',
  '--rate-limit',
  'off',
  '--log-level',
  'warn',
]);

try {
  console.log(
    `agentctl bench: node ${process.version}, ${cpus().length} CPUs, ${CONNECTIONS} connections, ${DURATION_SECONDS} s per load run\n`,
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
  sandbox.child.kill('SIGTERM');
  bare.child.kill('SIGTERM');
}
