/**
 * Read throughput and latency of the leaderboard, /v1 and GraphQL, next to a bare node:http
 * server, each twice: cached (one URL or document repeated, as a dashboard polls it: the
 * answer cache serves every read but the first) and uncached (a new URL, agent or set of
 * variables each request, so that the answer cache misses: see below), with rate limits off;
 * then one read with the spec's default rate limits on. A sample of every row's answers is
 * parsed and checked (the schema, the expected fields, GraphQL's `errors` absent: an error is
 * an HTTP 200 too); what fails counts in the `invalid` column.
 *
 * Why the uncached rows miss (src/sandbox/routes/response-cache.ts): /v1's cache is keyed on
 * the URL and GraphQL's on the method and the whole JSON body, each at most 2,000 entries
 * (all dropped when full); the leaderboard's is keyed on `limit` alone and kept until an agent
 * row changes. So /v1 and GraphQL rows send a URL or body never sent before, and each
 * leaderboard read follows a tier change (which moves the agents' version), one at a time.
 *
 * Part of `npm run bench`; on its own, after `npm run build:dist` (it starts a `--state`
 * sandbox of its own, registers agents and deposits, then restarts it with rate limits on):
 *
 *   node bench/reads.ts [--quick]
 */
import { rmSync } from 'node:fs';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import {
  DataError,
  DataVaultList,
  Health,
  Leaderboard,
  UserTransactions,
} from '../src/api/schemas/index.ts';
import {
  ADMIN_TOKEN,
  agentAddress,
  deposit,
  getJson,
  percentile,
  RATE_LIMITED_SERVE_ARGS,
  type Row,
  registerUpTo,
  type Sandbox,
  SERVE_ARGS,
  startChild,
  stop,
  temporaryStateDir,
} from './common.ts';

export const CONNECTIONS = 10;
/** One answer in so many is parsed and checked (the first one included). */
const CHECK_EVERY = 10;
/** Leaderboard reads timed one at a time, each after a tier change. */
const UNCACHED_LEADERBOARD_READS = 1000;

/** The GraphQL twin of GET /v1/vaults: every vault with its strategies. */
const VAULTS_DOCUMENT =
  '{ vaults { address name symbol tvl tvlUsd totalShares pricePerShare apy { current day7 day30 inception } fees { management performance hurdle } riskLevel isERC7540 strategies { id name status allocation apy riskScore sharpeRatio maxDrawdown } } }';
const TRANSACTIONS_DOCUMENT =
  'query ($address: String!, $limit: Int, $offset: Int) { userTransactions(address: $address, limit: $limit, offset: $offset) { hash type amount user status timestamp } }';

export const BARE_SERVER = `
const body = JSON.stringify({status:'ok',version:'0.0.0',chain_id:84532,chain_name:'Base Sepolia',rpc_connected:false});
const server = require('node:http').createServer((req, res) => {
  res.writeHead(200, {'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(body)});
  res.end(body);
});
server.listen(0, '127.0.0.1', () => console.log('listening on http://127.0.0.1:' + server.address().port));
`;

/** What the reads are measured on: a sandbox with agents, some of which have deposited. */
export interface ReadsSandbox {
  url: string;
  /** Every agent's API key. */
  keys: string[];
  /** Agents' server-side addresses with vault transactions, the busiest first. */
  depositors: string[];
  /** The busiest depositor's transaction count. */
  busyTransactions: number;
}

/** The n-th request of a row: its path, and optionally its headers and body. */
export interface Target {
  method?: 'GET' | 'POST';
  path: (n: number) => string;
  headers?: (n: number) => Record<string, string>;
  body?: (n: number) => string;
  /** Why the answer to the n-th request is wrong, or undefined when it is right. */
  check: (status: number, body: string, n: number) => string | undefined;
}

export interface ReadFigures {
  rps: number;
  p50: number;
  p99: number;
  samples: number;
  non2xx: number;
  /** Answers checked, and how many of those were wrong (with the first reason). */
  checked: number;
  invalid: number;
  problem?: string;
  statuses: Map<number, number>;
}

/** Runs `target` for one untimed second (a warm JIT), then for `seconds`. */
export async function load(url: string, target: Target, seconds: number): Promise<ReadFigures> {
  let next = 0;
  let responses = 0;
  let checked = 0;
  let invalid = 0;
  let problem: string | undefined;
  const statuses = new Map<number, number>();
  const request: autocannon.Request = {
    method: target.method ?? 'GET',
    setupRequest: (base, context) => {
      const n = next++;
      (context as { n?: number }).n = n;
      return {
        ...base,
        path: target.path(n),
        headers: {
          ...base.headers,
          ...(target.body && { 'content-type': 'application/json' }),
          ...target.headers?.(n),
        },
        ...(target.body && { body: target.body(n) }),
      };
    },
    onResponse: (status, body, context) => {
      statuses.set(status, (statuses.get(status) ?? 0) + 1);
      if (responses++ % CHECK_EVERY !== 0) return;
      checked++;
      let reason: string | undefined;
      try {
        reason = target.check(status, String(body), (context as { n: number }).n);
      } catch (error) {
        reason = String(error);
      }
      if (reason !== undefined) {
        invalid++;
        problem ??= reason;
      }
    },
  };
  // autocannon keeps what it builds on the request object: each run gets a copy of its own.
  const options = () => ({ url, connections: CONNECTIONS, requests: [{ ...request }] });
  await autocannon({ ...options(), duration: 1 });
  responses = checked = invalid = 0;
  problem = undefined;
  statuses.clear();
  const result = await autocannon({ ...options(), duration: seconds });
  return {
    rps: Math.round(result.requests.average),
    p50: result.latency.p50,
    p99: result.latency.p99,
    samples: (result.latency as { totalCount?: number }).totalCount ?? result.requests.total,
    non2xx: result.non2xx + result.errors,
    checked,
    invalid,
    problem,
    statuses,
  };
}

/** The reason a zod schema refuses `value`, or undefined. */
function refused(schema: { safeParse(value: unknown): { success: boolean; error?: unknown } }) {
  return (value: unknown) => {
    const result = schema.safeParse(value);
    return result.success ? undefined : String(result.error).slice(0, 200);
  };
}

const expect200 = (status: number) => (status === 200 ? undefined : `answered ${status}`);

/** GraphQL's answer: no `errors`, and `data` holding `field`. */
function graphqlData(status: number, body: string, field: string): unknown {
  if (status !== 200) throw new Error(`answered ${status}`);
  const answer = JSON.parse(body) as { data?: Record<string, unknown>; errors?: unknown };
  if (answer.errors !== undefined) throw new Error(`errors: ${JSON.stringify(answer.errors)}`);
  if (answer.data?.[field] === undefined) throw new Error(`no data.${field}`);
  return answer.data[field];
}

/** The leaderboard at its default limit (50), with `agents` agents registered. */
function leaderboardCheck(agents: number) {
  return (status: number, body: string) =>
    expect200(status) ??
    refused(Leaderboard)(JSON.parse(body)) ??
    (JSON.parse(body).agents.length === Math.min(50, agents) ? undefined : 'wrong agent count');
}

/**
 * Leaderboard reads one at a time, each right after a tier change of the busiest depositor
 * (at the top of the board), which the answer must show: so none is served from the cache.
 * The agent ends at the tier it had.
 */
async function leaderboardAfterTierChanges(sandbox: ReadsSandbox, agents: number, reads: number) {
  const wallet = sandbox.depositors[0] as string;
  const setTier = async (tier: string) => {
    const response = await fetch(`${sandbox.url}/sandbox/agents/tier`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-admin-token': ADMIN_TOKEN },
      body: JSON.stringify({ wallet_address: wallet, tier }),
    });
    if (response.status !== 200) throw new Error(`tier change answered ${response.status}`);
  };
  const check = leaderboardCheck(agents);
  const times: number[] = [];
  let invalid = 0;
  let problem: string | undefined;
  try {
    for (let i = 0; i < reads + 20; i++) {
      const tier = i % 2 === 0 ? 'observer' : 'unverified';
      await setTier(tier);
      const started = performance.now();
      const response = await fetch(`${sandbox.url}/api/v1/agents`);
      const body = await response.text();
      const ms = performance.now() - started;
      // The first 20 warm the JIT.
      if (i < 20) continue;
      times.push(ms);
      const observers = response.ok
        ? (JSON.parse(body) as { agents: Array<{ tier: string }> }).agents.filter(
            (agent) => agent.tier === 'observer',
          ).length
        : -1;
      const reason =
        check(response.status, body) ??
        (observers === (tier === 'observer' ? 1 : 0) ? undefined : 'a stale (cached) answer');
      if (reason !== undefined) {
        invalid++;
        problem ??= reason;
      }
    }
  } finally {
    await setTier('unverified');
  }
  times.sort((a, b) => a - b);
  return {
    p50: percentile(times, 50),
    p99: percentile(times, 99),
    samples: times.length,
    checked: times.length,
    invalid,
    problem,
  };
}

export interface ReadRow {
  name: string;
  /** A line printed under the row. */
  note?: string;
  figures: ReadFigures | Awaited<ReturnType<typeof leaderboardAfterTierChanges>>;
  target?: string;
}

/** Every read row, rate limits off; `agents` is how many the sandbox holds. */
export async function measureReads(
  sandbox: ReadsSandbox,
  bareUrl: string,
  agents: number,
  seconds: number,
): Promise<ReadRow[]> {
  const { url, depositors, busyTransactions } = sandbox;
  const busy = depositors[0] as string;
  const vaultCount = (await getJson(`${url}/v1/vaults`)).vaults.length as number;
  const vaultsCheck = (status: number, body: string) =>
    expect200(status) ??
    refused(DataVaultList)(JSON.parse(body)) ??
    (JSON.parse(body).vaults.length === vaultCount ? undefined : 'wrong vault count');
  const graphqlVaultsCheck = (status: number, body: string) => {
    const vaults = graphqlData(status, body, 'vaults') as Array<{
      address?: string;
      strategies?: unknown[];
    }>;
    if (vaults.length !== vaultCount) return 'wrong vault count';
    return vaults.every((vault) => vault.address && Array.isArray(vault.strategies))
      ? undefined
      : 'a vault without its address or strategies';
  };
  /** The n-th of many pages: each depositor in turn, at 10 offsets and 20 limits (3,400+ URLs). */
  const page = (n: number) => ({
    address: depositors[n % depositors.length] as string,
    offset: Math.floor(n / depositors.length) % 10,
    limit: 31 + (Math.floor(n / (depositors.length * 10)) % 20),
  });
  const pageCheck = (status: number, body: string, n: number) => {
    const error = expect200(status) ?? refused(UserTransactions)(JSON.parse(body));
    if (error) return error;
    const answer = JSON.parse(body) as {
      address: string;
      limit: number;
      offset: number;
      total: number;
      transactions: unknown[];
    };
    const asked = page(n);
    if (answer.address.toLowerCase() !== asked.address.toLowerCase()) return 'another address';
    if (answer.limit !== asked.limit || answer.offset !== asked.offset) return 'another page';
    return answer.transactions.length ===
      Math.max(0, Math.min(asked.limit, answer.total - asked.offset))
      ? undefined
      : 'wrong transaction count';
  };
  const rows: ReadRow[] = [];
  const add = async (name: string, target: Target, mark?: string) => {
    rows.push({ name, figures: await load(url, target, seconds), target: mark });
  };
  rows.push({
    name: 'bare node:http, fixed JSON',
    figures: await load(
      bareUrl,
      {
        path: () => '/',
        check: (status, body) => expect200(status) ?? refused(Health)(JSON.parse(body)),
      },
      seconds,
    ),
  });
  await add('serve GET /health', {
    path: () => '/health',
    check: (status, body) => expect200(status) ?? refused(Health)(JSON.parse(body)),
  });
  await add(
    `serve GET /api/v1/agents (${agents} agents, limit 50), cached`,
    { path: () => '/api/v1/agents', check: leaderboardCheck(agents) },
    '≥ 60%',
  );
  rows.push({
    name: `  uncached: each read after a tier change, one at a time`,
    figures: await leaderboardAfterTierChanges(sandbox, agents, UNCACHED_LEADERBOARD_READS),
  });
  await add('serve GET /v1/vaults, cached', { path: () => '/v1/vaults', check: vaultsCheck });
  await add('  uncached: a new URL each (?request=N, ignored)', {
    path: (n) => `/v1/vaults?request=${n}`,
    check: vaultsCheck,
  });
  const body = (variables?: object) => JSON.stringify({ query: VAULTS_DOCUMENT, variables });
  await add('serve POST /graphql { vaults { … strategies { … } } }, cached', {
    method: 'POST',
    path: () => '/graphql',
    body: () => body(),
    check: graphqlVaultsCheck,
  });
  await add('  uncached: new variables each ({request: N}, unused)', {
    method: 'POST',
    path: () => '/graphql',
    body: (n) => body({ request: n }),
    check: graphqlVaultsCheck,
  });
  await add(
    `serve GET /v1/users/:address/transactions (${busyTransactions} txs, limit 50), cached`,
    {
      path: () => `/v1/users/${busy}/transactions`,
      check: (status, text) =>
        expect200(status) ??
        refused(UserTransactions)(JSON.parse(text)) ??
        (JSON.parse(text).transactions.length === Math.min(50, busyTransactions)
          ? undefined
          : 'wrong transaction count'),
    },
  );
  await add(`  uncached: ${depositors.length} agents in turn, limit and offset varied`, {
    path: (n) => {
      const { address, limit, offset } = page(n);
      return `/v1/users/${address}/transactions?limit=${limit}&offset=${offset}`;
    },
    check: pageCheck,
  });
  await add(`serve POST /graphql userTransactions, uncached: as the row above`, {
    method: 'POST',
    path: () => '/graphql',
    body: (n) => JSON.stringify({ query: TRANSACTIONS_DOCUMENT, variables: page(n) }),
    check: (status, text, n) => {
      const transactions = graphqlData(status, text, 'userTransactions') as Array<{
        hash?: string;
      }>;
      if (transactions.length > page(n).limit) return 'more than the limit';
      return transactions.every((transaction) => transaction.hash)
        ? undefined
        : 'a transaction without its hash';
    },
  });
  return rows;
}

/**
 * GET /v1/vaults (cached) with the spec's default rate limits on: every agent key in turn (the
 * authenticated tier, 300 a minute and 100,000 a day per key), then no key (the public tier,
 * 60 a minute per IP, so all but the first are refused with 429). A refusal is checked too: a
 * 429 carrying RATE_LIMITED and Retry-After's seconds in its body.
 */
export async function measureRateLimitedReads(
  url: string,
  keys: string[],
  seconds: number,
): Promise<ReadRow[]> {
  const vaultCount = (await getJson(`${url}/v1/vaults`, { 'x-api-key': keys[0] as string })).vaults
    .length as number;
  const check = (status: number, body: string) => {
    const answer = JSON.parse(body);
    if (status === 429) {
      return (
        refused(DataError)(answer) ??
        (answer.error.code === 'RATE_LIMITED' ? undefined : `429 with ${answer.error.code}`)
      );
    }
    return (
      expect200(status) ??
      refused(DataVaultList)(answer) ??
      (answer.vaults.length === vaultCount ? undefined : 'wrong vault count')
    );
  };
  const keyed = await load(
    url,
    {
      path: () => '/v1/vaults',
      headers: (n) => ({ 'x-api-key': keys[n % keys.length] as string }),
      check,
    },
    seconds,
  );
  const keyless = await load(url, { path: () => '/v1/vaults', check }, seconds);
  const refusals = (figures: ReadFigures) =>
    `${figures.statuses.get(429) ?? 0} refused with 429, ${figures.statuses.get(200) ?? 0} answered`;
  return [
    {
      name: 'serve GET /v1/vaults, cached, default rate limits on',
      note: `${keys.length} agent keys in turn (300/min each): ${refusals(keyed)}`,
      figures: keyed,
    },
    {
      name: '  the same, no key',
      note: `the public tier (60/min per IP, spent in the untimed first second): ${refusals(keyless)}`,
      figures: keyless,
    },
  ];
}

export function printReads(rows: ReadRow[], printRow: Row) {
  const bare = rows[0]?.figures as ReadFigures;
  // The endpoints' names are longer than other sections': a wider first column.
  const row: Row = (name, ...cells) => printRow(name.padEnd(72), ...cells);
  row(
    'endpoint',
    'req/s'.padStart(8),
    'vs bare'.padStart(8),
    'p50 ms'.padStart(7),
    'p99 ms'.padStart(7),
    'samples'.padStart(8),
    'non-2xx'.padStart(8),
    'invalid'.padStart(12),
    'target'.padStart(8),
  );
  for (const { name, note, figures, target } of rows) {
    const throughput = 'rps' in figures;
    row(
      name,
      (throughput ? String(figures.rps) : '—').padStart(8),
      (throughput ? `${((figures.rps / bare.rps) * 100).toFixed(0)}%` : '—').padStart(8),
      figures.p50.toFixed(throughput ? 0 : 2).padStart(7),
      figures.p99.toFixed(throughput ? 0 : 2).padStart(7),
      String(figures.samples).padStart(8),
      (throughput ? String(figures.non2xx) : '—').padStart(8),
      `${figures.invalid} of ${figures.checked}`.padStart(12),
      (target ?? '').padStart(8),
    );
    if (note) row(`    ${note}`);
    if (figures.problem) row(`    first invalid answer: ${figures.problem}`);
  }
  row(
    `  p50 and p99 over every answer (samples); checked: one answer in ${CHECK_EVERY} under load, every one read one at a time`,
  );
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const quick = process.argv.includes('--quick');
  const seconds = quick ? 2 : 5;
  const agents = quick ? 100 : 300;
  const stateDir = temporaryStateDir();
  const bare = await startChild(['-e', BARE_SERVER]);
  let serve = await startChild([...SERVE_ARGS, '--state', stateDir]);
  try {
    const sandbox: Sandbox = { ...serve, keys: [], agents: 0 };
    await registerUpTo(sandbox, agents, 8);
    const prepared = await prepareReads(sandbox, quick ? 60 : 300);
    const print = (name: string, ...cells: string[]) => console.log(name.padEnd(58), ...cells);
    const rows = await measureReads(prepared, bare.url, agents, seconds);
    await stop(serve.child);
    serve = await startChild([...RATE_LIMITED_SERVE_ARGS, '--state', stateDir]);
    rows.push(...(await measureRateLimitedReads(serve.url, sandbox.keys, seconds)));
    printReads(rows, print);
  } finally {
    await Promise.all([stop(serve.child), stop(bare.child)]);
    rmSync(dirname(stateDir), { recursive: true, force: true });
  }
}

/**
 * For a sandbox of its own: 16 agents deposit 10 times each, and the last one `busy` times
 * more (as run.ts's write rows leave it).
 */
async function prepareReads(sandbox: Sandbox, busy: number): Promise<ReadsSandbox> {
  const depositorKeys = [
    sandbox.keys[sandbox.keys.length - 1] as string,
    ...sandbox.keys.slice(0, 16),
  ];
  await Promise.all(
    depositorKeys.map(async (apiKey) => {
      for (let i = 0; i < 10; i++) await deposit(sandbox.url, apiKey);
    }),
  );
  for (let i = 0; i < busy; i++) await deposit(sandbox.url, depositorKeys[0] as string);
  return readsSandbox(sandbox.url, sandbox.keys, depositorKeys);
}

/** The reads' view of a sandbox whose `depositorKeys` have deposited, the busiest first. */
export async function readsSandbox(
  url: string,
  keys: string[],
  depositorKeys: string[],
): Promise<ReadsSandbox> {
  const depositors = await Promise.all(depositorKeys.map((key) => agentAddress(url, key)));
  const busyTransactions = (await getJson(`${url}/v1/users/${depositors[0]}/transactions?limit=1`))
    .total as number;
  return { url, keys, depositors, busyTransactions };
}
