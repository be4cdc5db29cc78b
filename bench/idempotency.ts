/**
 * What an Idempotency-Key costs (issue 24): a keyed deposit's latency next to an unkeyed one,
 * the same agent's deposits alternating one kind and the other on the same `--state` sandbox
 * (same run, same conditions), then a replay's latency (the same key and body again: the
 * stored answer, nothing run). Part of `npm run bench`; on its own, after `npm run build:dist`
 * (it starts a `--state` sandbox of its own):
 *
 *   node bench/idempotency.ts [--quick]
 */
import { randomUUID } from 'node:crypto';
import { rmSync } from 'node:fs';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  fewSamples,
  fmt,
  percentile,
  type Row,
  registerOne,
  SERVE_ARGS,
  startChild,
  stop,
  temporaryStateDir,
} from './common.ts';

const DEPOSIT = JSON.stringify({ vault_id: 'moderate', amount_usdc: 1 });

/** One deposit by `apiKey`, with `key` as its Idempotency-Key if given; its latency in ms. */
async function timedDeposit(base: string, apiKey: string, key?: string, replay = false) {
  const started = performance.now();
  const response = await fetch(`${base}/api/v1/agent/vault/deposit`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      'x-api-key': apiKey,
      ...(key && { 'idempotency-key': key }),
    },
    body: DEPOSIT,
  });
  await response.arrayBuffer();
  const ms = performance.now() - started;
  const replayed = response.headers.get('idempotent-replayed');
  const expected = key === undefined ? null : String(replay);
  if (response.status !== 200 || replayed !== expected) {
    throw new Error(
      `a deposit${key ? ' with a key' : ''} answered ${response.status} (Idempotent-Replayed: ${replayed})`,
    );
  }
  return ms;
}

const summary = (times: number[]) => {
  const sorted = [...times].sort((a, b) => a - b);
  return { p50: percentile(sorted, 50), p99: percentile(sorted, 99), samples: sorted.length };
};

/**
 * `samples` deposits of each kind by the agent holding `apiKey`, one after another, keyed and
 * unkeyed in turn (which goes first alternates), then each keyed one sent again.
 */
export async function measureIdempotency(base: string, apiKey: string, samples: number) {
  await timedDeposit(base, apiKey);
  await timedDeposit(base, apiKey, randomUUID());
  const unkeyed: number[] = [];
  const keyed: number[] = [];
  const keys: string[] = [];
  for (let i = 0; i < samples; i++) {
    const key = randomUUID();
    keys.push(key);
    if (i % 2 === 0) {
      unkeyed.push(await timedDeposit(base, apiKey));
      keyed.push(await timedDeposit(base, apiKey, key));
    } else {
      keyed.push(await timedDeposit(base, apiKey, key));
      unkeyed.push(await timedDeposit(base, apiKey));
    }
  }
  const replays: number[] = [];
  for (const key of keys) replays.push(await timedDeposit(base, apiKey, key, true));
  return { unkeyed: summary(unkeyed), keyed: summary(keyed), replay: summary(replays) };
}

export function printIdempotency(
  figures: Awaited<ReturnType<typeof measureIdempotency>>,
  row: Row,
) {
  const { unkeyed, keyed, replay } = figures;
  row(
    `Idempotency-Key (one agent's deposits in a row, --state)`,
    'p50'.padStart(10),
    'p99'.padStart(10),
    'target'.padStart(10),
  );
  row(`  deposit, no key, ms${fewSamples(unkeyed.samples)}`, fmt(unkeyed.p50), fmt(unkeyed.p99));
  row(`  deposit, a new key, ms${fewSamples(keyed.samples)}`, fmt(keyed.p50), fmt(keyed.p99));
  row(
    '    cost of the key (p50 less p50), ms',
    fmt(keyed.p50 - unkeyed.p50),
    ''.padStart(10),
    '≤ 2'.padStart(10),
  );
  row(
    `  replay (its stored answer), ms${fewSamples(replay.samples)}`,
    fmt(replay.p50),
    fmt(replay.p99),
    '≤ 5 p50'.padStart(10),
  );
  row('    (the issue sets no target for a replay: ours, as it reads one row and runs nothing)');
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const quick = process.argv.includes('--quick');
  const stateDir = temporaryStateDir();
  const serve = await startChild([...SERVE_ARGS, '--state', stateDir]);
  try {
    const apiKey = await registerOne(serve.url);
    printIdempotency(
      await measureIdempotency(serve.url, apiKey, quick ? 60 : 300),
      (name, ...cells) => console.log(name.padEnd(58), ...cells),
    );
  } finally {
    await stop(serve.child);
    rmSync(dirname(stateDir), { recursive: true, force: true });
  }
}
