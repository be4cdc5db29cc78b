/**
 * GraphQL subscriptions' event latency: from a deposit's request to each of SUBSCRIBERS
 * graphql-ws clients receiving its transactionCreated, on a `--state` sandbox (a durable
 * write, as a kept sandbox answers it). That is the figure held to the target: the event is
 * published when the index commits, which the answer waits for, so "acknowledged to event" is
 * mostly negative and is printed only beside it. Part of `npm run bench`; on its own, after
 * `npm run build:dist` (it starts a `--state` sandbox of its own):
 *
 *   node bench/events.ts [--quick]
 */
import { rmSync } from 'node:fs';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type Client, createClient } from 'graphql-ws';
import {
  ADMIN_TOKEN,
  fewSamples,
  fmt,
  getJson,
  percentile,
  type Row,
  registerOne,
  SERVE_ARGS,
  sleep,
  startChild,
  stop,
  temporaryStateDir,
} from './common.ts';

/** GraphQL subscribers connected while deposits are timed, one socket each. */
export const SUBSCRIBERS = 100;

/** A graphql-ws client on a socket of its own, once the server has acknowledged connection_init. */
export function connectClient(base: string): Promise<Client> {
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
export async function subscriptionsReach(url: string, count: number) {
  for (let tries = 0; tries < 500; tries++) {
    const info = await getJson(`${url}/sandbox/info`, { 'x-admin-token': ADMIN_TOKEN });
    if (info.graphql.subscriptions === count) return;
    await sleep(20);
  }
  throw new Error(`the server never counted ${count} subscriptions`);
}

/**
 * From a deposit's request, and from its acknowledgement, to each of SUBSCRIBERS graphql-ws
 * clients receiving its transactionCreated, over `deposits` deposits one after another ("from
 * the acknowledgement" is negative when the event came first). An event that has not come 5 s
 * after the acknowledgement is missed.
 */
/**
 * SUBSCRIBERS subscribers on `url`; `deposits` deposits by `apiKey`, one after another, sent to
 * `writeUrl` (`url` unless given: a replica's neighbour, say); the delay from each deposit's
 * answer (and from its request) to each subscriber's event.
 */
export async function eventLatency(url: string, apiKey: string, deposits: number, writeUrl = url) {
  const arrivals = new Map<string, number[]>();
  let arrived = () => {};
  const clients = await Promise.all(Array.from({ length: SUBSCRIBERS }, () => connectClient(url)));
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
  await subscriptionsReach(url, SUBSCRIBERS);
  const fromAck: number[] = [];
  const fromRequest: number[] = [];
  let missed = 0;
  try {
    for (let i = 0; i < deposits; i++) {
      const requested = performance.now();
      const response = await fetch(`${writeUrl}/api/v1/agent/vault/deposit`, {
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
    deposits,
    fromAck: { p50: percentile(fromAck, 50), p99: percentile(fromAck, 99) },
    fromRequest: { p50: percentile(fromRequest, 50), p99: percentile(fromRequest, 99) },
    events: fromAck.length,
    early: fromAck.filter((ms) => ms < 0).length,
    missed,
  };
}

export function printEventLatency(events: Awaited<ReturnType<typeof eventLatency>>, row: Row) {
  row(
    `GraphQL subscriptions (${SUBSCRIBERS} transactionCreated subscribers, one socket each; --state)`,
    'p50'.padStart(10),
    'p99'.padStart(10),
    'target'.padStart(10),
  );
  row(
    `  deposit requested to event received, ms (${events.deposits} deposits, ${events.events} events${fewSamples(events.events)})`,
    fmt(events.fromRequest.p50),
    fmt(events.fromRequest.p99),
    '≤ 1000'.padStart(10),
  );
  row(
    '  deposit acknowledged to event received, ms (< 0: event first)',
    fmt(events.fromAck.p50, 2),
    fmt(events.fromAck.p99, 2),
  );
  row(
    `  events received ${events.events} (${events.early} before the acknowledgement), missed ${events.missed}`,
  );
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const quick = process.argv.includes('--quick');
  const stateDir = temporaryStateDir();
  const serve = await startChild([...SERVE_ARGS, '--state', stateDir]);
  try {
    const apiKey = await registerOne(serve.url);
    printEventLatency(await eventLatency(serve.url, apiKey, quick ? 20 : 100), (name, ...cells) =>
      console.log(name.padEnd(58), ...cells),
    );
  } finally {
    await stop(serve.child);
    rmSync(dirname(stateDir), { recursive: true, force: true });
  }
}
