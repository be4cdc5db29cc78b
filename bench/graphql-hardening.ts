/**
 * Bench figures of /graphql under hostile load (issue 21, section 1), each measured in a serve
 * of its own so that one flood does not colour the next:
 *
 * - a deposit's latency with 10,000 idle subscriptions (on other topics), and with 10,000
 *   on its own topics (each has every event), next to none;
 * - serve's RSS through a flood of unique ~16 KiB documents at the node tier's rate;
 * - GET /health's p99 while one agent key sends error-heavy documents at its tier's rate,
 *   next to /health idle.
 *
 * run.ts calls these and prints the rows.
 */
import type { ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import WebSocket from 'ws';

/** What run.ts lends: starting and stopping a serve, registering an agent. */
export interface BenchTools {
  /** Starts `agentctl serve` with these arguments after `serve`; its URL and process. */
  startServe(args: string[]): Promise<{ url: string; child: ChildProcess }>;
  stop(child: ChildProcess): Promise<void>;
  /** Registers a new agent (funded by the sandbox) and answers its API key. */
  registerAgent(url: string): Promise<string>;
  adminToken: string;
  quick: boolean;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return (
    sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? Number.NaN
  );
}

/** A process's resident set, in MiB (Linux). */
function rssMiB(pid: number | undefined): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kib = Number(/^VmRSS:\s+(\d+)/m.exec(status)?.[1] ?? Number.NaN);
  return kib / 1024;
}

async function deposit(url: string, apiKey: string, vault = 'moderate'): Promise<number> {
  const started = performance.now();
  const request = () =>
    fetch(`${url}/api/v1/agent/vault/deposit`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': apiKey },
      body: JSON.stringify({ vault_id: vault, amount_usdc: 1 }),
    });
  // A pooled connection the server closed as idle (its keep-alive timeout) is reset at
  // reuse: the deposit is sent again on a new one.
  const response = await request().catch((error: { cause?: { code?: string } }) => {
    if (error.cause?.code === 'ECONNRESET') return request();
    throw error;
  });
  const body = await response.text();
  if (response.status !== 200) throw new Error(`deposit answered ${response.status}: ${body}`);
  return performance.now() - started;
}

async function graphqlInfo(url: string, adminToken: string) {
  const response = await fetch(`${url}/sandbox/info`, { headers: { 'x-admin-token': adminToken } });
  return (
    (await response.json()) as {
      graphql: { subscriptions: number; distinct_subscriptions: number };
    }
  ).graphql;
}

/** A raw graphql-transport-ws socket, acknowledged; it counts what it receives. */
async function openSocket(url: string, received: { frames: number }): Promise<WebSocket> {
  const socket = new WebSocket(`${url.replace(/^http/, 'ws')}/graphql`, 'graphql-transport-ws', {
    perMessageDeflate: false,
  });
  await new Promise<void>((resolve, reject) => {
    socket.once('open', () => {
      socket.send('{"type":"connection_init"}');
    });
    socket.once('message', () => resolve());
    socket.once('error', reject);
  });
  socket.on('message', () => {
    received.frames++;
  });
  return socket;
}

const HEAVY_SELECTION =
  'address name symbol tvl tvlUsd totalShares pricePerShare apy { current day7 day30 inception } fees { management performance hurdle } riskLevel isERC7540 strategies { id name status allocation apy riskScore sharpeRatio maxDrawdown }';

/**
 * Sequential deposits' latency (p50, p99) with no subscription, then with 500 sockets × 20
 * subscriptions on the moderate vault's topics (vaultUpdated and transactionCreated with the
 * vault's whole detail, in 10 distinct documents), whose clients read and discard: deposits
 * into that vault (every subscription has each event), and into another (none has).
 */
export async function depositsUnderSubscriptions(tools: BenchTools) {
  const sockets = 500;
  const perSocket = 20;
  const deposits = tools.quick ? 20 : 60;
  const { url, child } = await tools.startServe(['--rate-limit', 'off', '--log-level', 'warn']);
  const open: WebSocket[] = [];
  try {
    const apiKey = await tools.registerAgent(url);
    const vaults = (await (await fetch(`${url}/v1/vaults`)).json()) as {
      vaults: Array<{ address: string; name: string }>;
    };
    const moderate = vaults.vaults.find((vault) => /moderate/i.test(vault.name))?.address;
    const measure = async (vault = 'moderate') => {
      await deposit(url, apiKey, vault);
      const times: number[] = [];
      for (let i = 0; i < deposits; i++) times.push(await deposit(url, apiKey, vault));
      return { p50: percentile(times, 50), p99: percentile(times, 99), samples: times.length };
    };
    const none = await measure();
    const received = { frames: 0 };
    for (let s = 0; s < sockets; s += 50) {
      open.push(
        ...(await Promise.all(
          Array.from({ length: Math.min(50, sockets - s) }, () => openSocket(url, received)),
        )),
      );
    }
    open.forEach((socket, s) => {
      for (let i = 0; i < perSocket; i++) {
        // 20 distinct documents: two fields, ten aliases of the root.
        const query =
          i % 2 === 0
            ? `subscription { v${i % 10}: vaultUpdated(address: "${moderate}") { ${HEAVY_SELECTION} } }`
            : `subscription { t${i % 10}: transactionCreated(vaultAddress: "${moderate}") { hash type amount user timestamp vault { ${HEAVY_SELECTION} } } }`;
        socket.send(JSON.stringify({ id: `${s}-${i}`, type: 'subscribe', payload: { query } }));
      }
    });
    const total = sockets * perSocket;
    let info = await graphqlInfo(url, tools.adminToken);
    for (let tries = 0; info.subscriptions < total && tries < 3000; tries++) {
      await sleep(20);
      info = await graphqlInfo(url, tools.adminToken);
    }
    const framesBefore = received.frames;
    const subscribed = await measure();
    // Let the last events arrive before counting them.
    await sleep(1000);
    const eventsPerDeposit = (received.frames - framesBefore) / (deposits + 1);
    const elsewhere = await measure('conservative');
    return {
      none,
      subscribed,
      elsewhere,
      eventsPerDeposit,
      subscriptions: info.subscriptions,
      distinct: info.distinct_subscriptions,
    };
  } finally {
    for (const socket of open) socket.terminate();
    await tools.stop(child);
  }
}

/** A node key, whose tier allows 1,000 requests a minute. */
async function nodeKey(url: string, adminToken: string): Promise<string> {
  const response = await fetch(`${url}/sandbox/nodes`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-admin-token': adminToken },
    body: JSON.stringify({
      name: 'bench flood',
      operator_address: '0x00000000000000000000000000000000000000dd',
    }),
  });
  return ((await response.json()) as { node_key: string }).node_key;
}

/** A tiny query padded with about 8,000 comment tokens to ~16 KiB, unique by `n`. */
const paddedDocument = (n: number) =>
  `{ protocolStats { totalTvl } }\n# ${n}\n${'#\n'.repeat(8000)}`.slice(0, 16 * 1024 - 16);

/**
 * serve's RSS before, at the end of, and 10 s after a flood of unique ~16 KiB documents at
 * the node tier's rate (1,000 a minute) for a minute (15 s with --quick), rate limits on.
 */
export async function rssUnderDocumentFlood(tools: BenchTools) {
  const seconds = tools.quick ? 15 : 60;
  const perSecond = 1000 / 60;
  const { url, child } = await tools.startServe(['--log-level', 'warn']);
  try {
    const key = await nodeKey(url, tools.adminToken);
    const before = rssMiB(child.pid);
    let peak = before;
    let sent = 0;
    let refused = 0;
    const started = performance.now();
    const pending: Promise<void>[] = [];
    while (performance.now() - started < seconds * 1000) {
      const due = Math.floor(((performance.now() - started) / 1000) * perSecond);
      while (sent < due) {
        const n = sent++;
        pending.push(
          fetch(`${url}/graphql`, {
            method: 'POST',
            headers: { 'content-type': 'application/json', 'x-api-key': key },
            body: JSON.stringify({ query: paddedDocument(n) }),
          }).then(async (response) => {
            await response.arrayBuffer();
            if (response.status !== 200) refused++;
          }),
        );
      }
      peak = Math.max(peak, rssMiB(child.pid));
      await sleep(50);
    }
    await Promise.all(pending);
    const end = rssMiB(child.pid);
    await sleep(10_000);
    return {
      before,
      peak: Math.max(peak, end),
      end,
      after: rssMiB(child.pid),
      sent,
      refused,
      seconds,
    };
  } finally {
    await tools.stop(child);
  }
}

/** A document with 100 validation errors, padded to ~16 KiB, unique by `n`. */
const errorHeavyDocument = (n: number) => {
  const fields = Array.from({ length: 100 }, (_, i) => `unknown${i}`).join(' ');
  return `{ vaults { ${fields} } }\n# ${n}\n${'#\n'.repeat(7000)}`.slice(0, 16 * 1024 - 16);
};

/** GET /health's latencies, one after another every 20 ms, for `ms`. */
async function healthLatencies(url: string, ms: number): Promise<number[]> {
  const times: number[] = [];
  const until = performance.now() + ms;
  while (performance.now() < until) {
    const started = performance.now();
    const response = await fetch(`${url}/health`);
    await response.arrayBuffer();
    times.push(performance.now() - started);
    await sleep(20);
  }
  return times;
}

/**
 * /health's p50 and p99 idle, then while one agent key sends error-heavy documents at its
 * tier's rate (300 a minute, evenly), for 30 s (10 s with --quick), rate limits on.
 */
export async function healthUnderErrorFlood(tools: BenchTools) {
  const seconds = tools.quick ? 10 : 30;
  const { url, child } = await tools.startServe(['--log-level', 'warn']);
  try {
    const apiKey = await tools.registerAgent(url);
    // Warm up both paths first.
    await healthLatencies(url, 1000);
    const idle = await healthLatencies(url, seconds * 1000);
    let running = true;
    let sent = 0;
    let refused = 0;
    const answered: number[] = [];
    const flood = (async () => {
      const started = performance.now();
      const pending: Promise<void>[] = [];
      while (running) {
        const due = Math.floor(((performance.now() - started) / 1000) * 5);
        while (sent < due) {
          const n = sent++;
          const requested = performance.now();
          pending.push(
            fetch(`${url}/graphql`, {
              method: 'POST',
              headers: { 'content-type': 'application/json', 'x-api-key': apiKey },
              body: JSON.stringify({ query: errorHeavyDocument(n) }),
            }).then(async (response) => {
              await response.arrayBuffer();
              if (response.status === 429) refused++;
              answered.push(performance.now() - requested);
            }),
          );
        }
        await sleep(10);
      }
      await Promise.all(pending);
    })();
    const loaded = await healthLatencies(url, seconds * 1000);
    running = false;
    await flood;
    return {
      idle: { p50: percentile(idle, 50), p99: percentile(idle, 99), samples: idle.length },
      loaded: { p50: percentile(loaded, 50), p99: percentile(loaded, 99), samples: loaded.length },
      documents: {
        p50: percentile(answered, 50),
        p99: percentile(answered, 99),
        samples: answered.length,
      },
      sent,
      refused,
      seconds,
    };
  } finally {
    await tools.stop(child);
  }
}
