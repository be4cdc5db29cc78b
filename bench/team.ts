/**
 * The team sandbox on PostgreSQL (issue 25), each figure next to SQLite's from the same run:
 * - a deposit's latency on a writer kept in PostgreSQL, and on a `--state` sandbox (SQLite),
 *   one agent's deposits in turn on the two (same moments, same machine);
 * - GET /v1/vaults uncached (a new URL each) through one read replica, and on the --state one;
 * - a deposit made through replica A, from its answer to its event on replica B's subscribers,
 *   next to the same on the --state sandbox's own subscribers;
 * - failover: the writer's host dies (kill -9 of serve and its anvils at once) under write
 *   load, and a new writer started on the same database answers a write; next to a `--state`
 *   sandbox killed the same way and started again on its directory.
 * PostgreSQL runs in a throwaway cluster of its own, with its defaults (every commit flushed,
 * as SQLite's are). Part of `npm run bench`; on its own, after `npm run build:dist`:
 *
 *   node bench/team.ts [--quick]
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { DataVaultList } from '../src/api/schemas/index.ts';
import { startCluster, stopCluster } from '../test/helpers/postgres.ts';
import {
  ADMIN_TOKEN,
  fewSamples,
  fmt,
  percentile,
  type Row,
  registerOne,
  SERVE_ARGS,
  sleep,
  temporaryStateDir,
} from './common.ts';
import { eventLatency, SUBSCRIBERS } from './events.ts';
import { load, type Target } from './reads.ts';

/** The sandbox secret the bench's writers seal their mnemonic with (a bench's, not a secret). */
const SECRET = 'bench-sandbox-secret-0123456789';
const DEPOSIT = JSON.stringify({ vault_id: 'moderate', amount_usdc: 1 });
/** Agents depositing one after another, each, while the writer is killed. */
const FAILOVER_WRITERS = 4;

interface Started {
  url: string;
  child: ChildProcess;
  /** When the process was spawned (performance.now()). */
  spawnedAt: number;
}

/** Starts a serve with `args`; resolves once it says where it listens. */
function serve(args: string[]): Promise<Started> {
  const spawnedAt = performance.now();
  const child = spawn(process.execPath, [...SERVE_ARGS, ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, AGENTCTL_ADMIN_TOKEN: ADMIN_TOKEN, AGENTCTL_SANDBOX_SECRET: SECRET },
  });
  child.stderr?.on('data', (chunk: Buffer) => {
    for (const line of String(chunk).split('\n')) {
      if (line && !/^SIG\w+ received, shutting down$/.test(line)) process.stderr.write(`${line}\n`);
    }
  });
  return new Promise((resolve, reject) => {
    let out = '';
    child.stdout?.on('data', (chunk) => {
      out += chunk;
      const match = /listening on (http:\/\/\S+)/.exec(out);
      if (match?.[1]) resolve({ url: match[1], child, spawnedAt });
    });
    child.on('exit', (code) => reject(new Error(`serve ${args.join(' ')} exited with ${code}`)));
  });
}

function stopped(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    child.removeAllListeners('exit');
    child.once('exit', () => resolve());
    child.kill('SIGTERM');
  });
}

/** The process and every process under it, deepest first. */
function processTree(pid: number): number[] {
  let children: number[] = [];
  try {
    children = execFileSync('pgrep', ['-P', String(pid)], { encoding: 'utf8' })
      .split('\n')
      .filter(Boolean)
      .map(Number);
  } catch {
    // pgrep exits 1 when there is none.
  }
  return [...children.flatMap(processTree), pid];
}

/** The host dies: serve and its anvils killed with SIGKILL at the same moment. */
function killHost(child: ChildProcess): void {
  for (const pid of processTree(child.pid as number)) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // Gone already.
    }
  }
  child.removeAllListeners('exit');
}

/** One deposit; its latency in ms, or throws with its status. */
async function timedDeposit(base: string, apiKey: string): Promise<number> {
  const started = performance.now();
  const response = await fetch(`${base}/api/v1/agent/vault/deposit`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': apiKey },
    body: DEPOSIT,
  });
  await response.arrayBuffer();
  if (response.status !== 200) throw new Error(`a deposit answered ${response.status}`);
  return performance.now() - started;
}

const summary = (times: number[]) => {
  const sorted = [...times].sort((a, b) => a - b);
  return { p50: percentile(sorted, 50), p99: percentile(sorted, 99), samples: sorted.length };
};

/** `samples` deposits on each of two sandboxes, in turn (which goes first alternates). */
async function depositsInTurn(
  a: { url: string; key: string },
  b: { url: string; key: string },
  samples: number,
) {
  await timedDeposit(a.url, a.key);
  await timedDeposit(b.url, b.key);
  const onA: number[] = [];
  const onB: number[] = [];
  for (let i = 0; i < samples; i++) {
    if (i % 2 === 0) {
      onA.push(await timedDeposit(a.url, a.key));
      onB.push(await timedDeposit(b.url, b.key));
    } else {
      onB.push(await timedDeposit(b.url, b.key));
      onA.push(await timedDeposit(a.url, a.key));
    }
  }
  return { a: summary(onA), b: summary(onB) };
}

/**
 * Failover of the sandbox `start()` serves: FAILOVER_WRITERS agents deposit without a pause
 * (each with an Idempotency-Key, sent again until answered), the host is killed, `start()`
 * runs again, and the time is taken from the kill to the next deposit acknowledged, and from
 * the new process's spawn to its ready line. Answers other than 200 and the refusals of a
 * sandbox coming up (503), or a connection refused, are counted as unexpected.
 */
async function failover(start: () => Promise<Started>) {
  let current = await start();
  const keys: string[] = [];
  for (let i = 0; i < FAILOVER_WRITERS; i++) keys.push(await registerOne(current.url));
  let writing = true;
  let acknowledged = 0;
  let unexpected = 0;
  let killedAt = Number.POSITIVE_INFINITY;
  let firstAfterKill: number | undefined;
  const writer = async (apiKey: string) => {
    while (writing) {
      const key = randomUUID();
      for (;;) {
        if (!writing) return;
        const sentAt = performance.now();
        const response = await fetch(`${current.url}/api/v1/agent/vault/deposit`, {
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            'x-api-key': apiKey,
            'idempotency-key': key,
          },
          body: DEPOSIT,
        }).catch(() => undefined);
        const status = response?.status;
        await response?.arrayBuffer().catch(() => undefined);
        if (status === 200) {
          acknowledged++;
          // A write sent after the kill, so answered by the new serve (an answer sent before
          // may be read after the kill).
          if (sentAt > killedAt && firstAfterKill === undefined) firstAfterKill = performance.now();
          break;
        }
        if (status !== undefined && status !== 503 && status !== 409) unexpected++;
        await sleep(10);
      }
    }
  };
  const writers = keys.map(writer);
  await sleep(1500);
  killedAt = performance.now();
  killHost(current.child);
  current = await start();
  const readyMs = performance.now() - current.spawnedAt;
  while (firstAfterKill === undefined) await sleep(5);
  const failoverMs = firstAfterKill - killedAt;
  writing = false;
  await Promise.all(writers);
  await stopped(current.child);
  return { failoverMs, readyMs, acknowledged, unexpected };
}

async function createDatabase(adminUrl: string, name: string): Promise<string> {
  const client = new pg.Client({ connectionString: adminUrl });
  await client.connect();
  try {
    await client.query(`CREATE DATABASE ${name}`);
  } finally {
    await client.end();
  }
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  return url.toString();
}

/** GET /v1/vaults?request=N: a new URL each, so that the answer cache misses (reads.ts). */
const uncachedVaults: Target = {
  path: (n) => `/v1/vaults?request=${n}`,
  check: (status, body) => {
    if (status !== 200) return `answered ${status}`;
    return DataVaultList.safeParse(JSON.parse(body)).success ? undefined : 'not a vault list';
  },
};

export async function measureTeam(options: {
  samples: number;
  readSeconds: number;
  eventDeposits: number;
}) {
  const root = mkdtempSync(join(tmpdir(), 'agentctl-bench-pg-'));
  const sqliteDir = temporaryStateDir();
  const failoverDir = temporaryStateDir();
  const started: ChildProcess[] = [];
  const start = async (args: string[]) => {
    const one = await serve(args);
    started.push(one.child);
    return one;
  };
  try {
    const adminUrl = await startCluster(root, { durable: true });
    const [teamDb, failoverDb] = [
      await createDatabase(adminUrl, 'bench_team'),
      await createDatabase(adminUrl, 'bench_failover'),
    ];
    const sqlite = await start(['--state', sqliteDir]);
    const writer = await start(['--database', teamDb]);
    const sqliteKey = await registerOne(sqlite.url);
    const deposits = await depositsInTurn(
      { url: sqlite.url, key: sqliteKey },
      { url: writer.url, key: await registerOne(writer.url) },
      options.samples,
    );
    // Two replicas of the writer's database: reads through one, events across the two.
    const [a, b] = [
      await start(['--replica', '--database', teamDb]),
      await start(['--replica', '--database', teamDb]),
    ];
    const reads = {
      replica: await load(a.url, uncachedVaults, options.readSeconds),
      sqlite: await load(sqlite.url, uncachedVaults, options.readSeconds),
    };
    const events = {
      replicas: await eventLatency(b.url, await registerOne(a.url), options.eventDeposits, a.url),
      sqlite: await eventLatency(sqlite.url, sqliteKey, options.eventDeposits),
    };
    for (const child of started.splice(0)) await stopped(child);

    const onPostgres = await failover(() => serve(['--database', failoverDb]));
    const onSqlite = await failover(() => serve(['--state', failoverDir]));
    return {
      deposits: { sqlite: deposits.a, postgres: deposits.b },
      reads,
      events,
      onPostgres,
      onSqlite,
    };
  } finally {
    for (const child of started) await stopped(child);
    await stopCluster(root).catch(() => undefined);
    rmSync(root, { recursive: true, force: true });
    rmSync(dirname(sqliteDir), { recursive: true, force: true });
    rmSync(dirname(failoverDir), { recursive: true, force: true });
  }
}

export function printTeam(figures: Awaited<ReturnType<typeof measureTeam>>, row: Row) {
  const { deposits, reads, events, onPostgres, onSqlite } = figures;
  row(
    'team sandbox (PostgreSQL) next to SQLite, same run',
    'p50'.padStart(10),
    'p99'.padStart(10),
    'peer p50'.padStart(10),
    'peer p99'.padStart(10),
  );
  row(
    `  deposit, writer on PostgreSQL | --state, ms${fewSamples(deposits.postgres.samples)}`,
    fmt(deposits.postgres.p50),
    fmt(deposits.postgres.p99),
    fmt(deposits.sqlite.p50),
    fmt(deposits.sqlite.p99),
  );
  row(
    `  GET /v1/vaults uncached, a replica | --state, ms (${reads.replica.rps.toFixed(0)} | ${reads.sqlite.rps.toFixed(0)} req/s)`,
    fmt(reads.replica.p50),
    fmt(reads.replica.p99),
    fmt(reads.sqlite.p50),
    fmt(reads.sqlite.p99),
  );
  row(
    `    (${reads.replica.samples} | ${reads.sqlite.samples} answers, ${reads.replica.invalid + reads.sqlite.invalid} of ${reads.replica.checked + reads.sqlite.checked} checked wrong, ${reads.replica.non2xx + reads.sqlite.non2xx} not 2xx)`,
  );
  row(
    `  deposit answered → event: on replica B, made through A | on --state${fewSamples(events.replicas.events)}`,
    fmt(events.replicas.fromAck.p50),
    fmt(events.replicas.fromAck.p99),
    fmt(events.sqlite.fromAck.p50),
    fmt(events.sqlite.fromAck.p99),
  );
  row(
    `    (${SUBSCRIBERS} subscribers each; target ≤ 250 p99 across replicas; missed ${events.replicas.missed} | ${events.sqlite.missed})`,
  );
  row('', 'ms'.padStart(10), ''.padStart(10), 'peer'.padStart(10));
  row(
    '  failover: kill -9 of the host → a write acknowledged',
    fmt(onPostgres.failoverMs, 0),
    ''.padStart(10),
    fmt(onSqlite.failoverMs, 0),
  );
  row(
    '    of which the new serve, spawn → ready',
    fmt(onPostgres.readyMs, 0),
    ''.padStart(10),
    fmt(onSqlite.readyMs, 0),
  );
  row(
    `    (a new writer on the same database | the same --state dir started again; ` +
      `${onPostgres.acknowledged} | ${onSqlite.acknowledged} deposits acknowledged by ` +
      `${FAILOVER_WRITERS} agents, ${onPostgres.unexpected + onSqlite.unexpected} unexpected answers)`,
  );
}

/** The section's sizes: `npm run bench`'s, or its --quick run's. */
export const teamSizes = (quick: boolean) => ({
  samples: quick ? 60 : 300,
  readSeconds: quick ? 2 : 5,
  eventDeposits: quick ? 20 : 100,
});

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const quick = process.argv.includes('--quick');
  printTeam(await measureTeam(teamSizes(quick)), (name, ...cells) =>
    console.log(name.padEnd(58), ...cells),
  );
}
