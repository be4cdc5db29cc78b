import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { buildClientSchema, getIntrospectionQuery, parse, printSchema } from 'graphql';
import { type Client, createClient } from 'graphql-ws';
import pg from 'pg';
import {
  type Address,
  createWalletClient,
  erc20Abi,
  type Hash,
  http,
  parseAbi,
  parseUnits,
} from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { baseSepolia } from 'viem/chains';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { SandboxVault } from '../../src/sandbox/chain/contracts/artifacts.ts';
import { type ChainReader, call, chainAgent, useChainSandbox } from '../helpers/chain.ts';
import { admin, type TestSandbox } from '../helpers/sandbox.ts';

let sandbox: TestSandbox;
let reader: ChainReader;
let wsUrl: string;
useChainSandbox(
  (started, chain) => {
    sandbox = started;
    reader = chain;
  },
  { graphiql: true, graphqlLimits: { connectionInitTimeoutMs: 300, maxSubscriptionsPerSocket: 3 } },
);
beforeAll(async () => {
  const address = await sandbox.app.listen({ host: '127.0.0.1', port: 0 });
  wsUrl = `${address.replace(/^http/, 'ws')}/graphql`;
});

const DAY = 86_400;
const VAULT_ABI = parseAbi([
  'function totalAssets() view returns (uint256)',
  'function totalSupply() view returns (uint256)',
  'function convertToAssets(uint256) view returns (uint256)',
]);

// biome-ignore lint/suspicious/noExplicitAny: GraphQL and REST bodies are compared field by field
type Body = any;

async function gql(query: string, variables?: Record<string, unknown>) {
  const response = await sandbox.app.inject({
    method: 'POST',
    url: '/graphql',
    payload: { query, ...(variables && { variables }) },
  });
  return { status: response.statusCode, body: response.json() as Body };
}

async function rest(url: string): Promise<Body> {
  const response = await sandbox.app.inject({ url });
  expect(response.statusCode).toBe(200);
  return response.json();
}

const vaultOf = (id: 'conservative' | 'moderate' | 'aggressive' | 'configurable') =>
  sandbox.chain.deployment.vaults[id];

async function deposit(apiKey: string, vault_id: string, amount_usdc: number) {
  const response = await call(sandbox, apiKey, 'POST', '/api/v1/agent/vault/deposit', {
    vault_id,
    amount_usdc,
  });
  expect(response.statusCode).toBe(200);
  return { tx: response.json().deposit_tx as string, answeredAt: performance.now() };
}

/** A subscription with a queue of its events, read with next(timeout). */
function subscription(client: Client, query: string, variables: Record<string, unknown> = {}) {
  const events: Body[] = [];
  const waiters: Array<(event: Body) => void> = [];
  let failure: unknown;
  const stop = client.subscribe(
    { query, variables },
    {
      next: (value) => {
        const waiter = waiters.shift();
        if (waiter) waiter(value);
        else events.push(value);
      },
      error: (error) => {
        failure = error;
      },
      complete: () => {},
    },
  );
  return {
    stop,
    failure: () => failure,
    pending: () => events.length,
    next(timeoutMs = 1000): Promise<Body> {
      const queued = events.shift();
      if (queued) return Promise.resolve(queued);
      return new Promise((resolve, reject) => {
        const timer = setTimeout(
          () => reject(new Error(`no event within ${timeoutMs} ms`)),
          timeoutMs,
        );
        waiters.push((event) => {
          clearTimeout(timer);
          resolve(event);
        });
      });
    },
  };
}

const clients: Client[] = [];
function connect(options: { apiKey?: string } = {}): Client {
  const client = createClient({
    url: wsUrl,
    retryAttempts: 0,
    lazy: false,
    ...(options.apiKey && { connectionParams: { apiKey: options.apiKey } }),
  });
  clients.push(client);
  return client;
}
afterAll(async () => {
  await Promise.all(clients.map((client) => client.dispose()));
});

async function graphqlInfo() {
  return (await admin(sandbox.app, 'GET', '/sandbox/info')).json().graphql as {
    sockets: number;
    subscriptions: number;
  };
}

/**
 * Waits until the subscriptions of earlier tests are gone: their stop is asynchronous, and a
 * count that still holds them would say a new subscription is live before it is.
 */
async function noSubscriptionsLeft() {
  const info = await eventually(graphqlInfo, (current) => current.subscriptions === 0);
  expect(info.subscriptions).toBe(0);
}

async function eventually<T>(read: () => Promise<T>, ok: (value: T) => boolean, ms = 2000) {
  const until = Date.now() + ms;
  for (;;) {
    const value = await read();
    if (ok(value) || Date.now() > until) return value;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

describe('the schema', () => {
  it('is the committed schema.graphql (run `npm run build:schema` after changing it)', async () => {
    const { body } = await gql(getIntrospectionQuery());
    expect(body.errors).toBeUndefined();
    const served = `${printSchema(buildClientSchema(body.data))}\n`;
    expect(served).toBe(readFileSync(new URL('../../schema.graphql', import.meta.url), 'utf8'));
  });

  it('has the spec’s types with exactly its fields and nullability', async () => {
    const { body } = await gql(
      `{ __type(name: "Vault") { fields { name type { kind name ofType { kind name } } } } }`,
    );
    const fields = Object.fromEntries(
      body.data.__type.fields.map((f: Body) => [
        f.name,
        f.type.kind === 'NON_NULL' ? `${f.type.ofType.name ?? f.type.ofType.kind}!` : f.type.name,
      ]),
    );
    expect(fields).toEqual({
      address: 'String!',
      name: 'String!',
      symbol: 'String!',
      tvl: 'BigInt!',
      tvlUsd: 'Float!',
      totalShares: 'BigInt!',
      pricePerShare: 'BigInt!',
      apy: 'APY!',
      fees: 'Fees!',
      riskLevel: 'RiskLevel!',
      strategies: 'LIST!',
      isERC7540: 'Boolean!',
      fulfillmentDelay: 'Int',
      createdAt: 'DateTime!',
      // Ours, beyond the spec: the time of the block the state is at, so that vaultUpdated's
      // events say when they happened (docs/data-api.md).
      updatedAt: 'DateTime!',
    });
  });
});

const isoTime = (seconds: bigint | number) =>
  new Date(Number(seconds) * 1000).toISOString().replace('.000Z', 'Z');

/**
 * Shares sent by a transfer to a new address, from a wallet of our own over the RPC URL; the
 * receiver's position is dated by the transfer's block (the bug fixed in 16794d4 left it null
 * in /v1 and 1970 in GraphQL). Answers the receiver and that block's time.
 */
async function positionByTransfer(): Promise<{ receiver: Address; receivedAt: string }> {
  const account = privateKeyToAccount(generatePrivateKey());
  const funded = await admin(sandbox.app, 'POST', '/sandbox/fund', {
    address: account.address,
    usdc: 20,
    eth: 1,
  });
  expect(funded.statusCode).toBe(200);
  const wallet = createWalletClient({
    account,
    chain: baseSepolia,
    transport: http(sandbox.chain.rpcUrl),
  });
  const send = async (hash: Promise<Hash>) => {
    const receipt = await reader.waitForTransactionReceipt({
      hash: await hash,
      pollingInterval: 50,
    });
    expect(receipt.status).toBe('success');
    return receipt;
  };
  const vault = vaultOf('moderate');
  // A margin of gas: a vault call accrues yield first (docs/chain.md).
  const gas = 300_000n;
  await send(
    wallet.writeContract({
      address: sandbox.chain.deployment.usdc,
      abi: erc20Abi,
      functionName: 'approve',
      args: [vault, parseUnits('10', 6)],
    }),
  );
  await send(
    wallet.writeContract({
      address: vault,
      abi: SandboxVault.abi,
      functionName: 'deposit',
      args: [parseUnits('10', 6), account.address],
      gas,
    }),
  );
  const receiver = privateKeyToAccount(generatePrivateKey()).address;
  const transfer = await send(
    wallet.writeContract({
      address: vault,
      abi: SandboxVault.abi,
      functionName: 'transfer',
      args: [receiver, 4_000_000n],
      gas,
    }),
  );
  const { timestamp } = await reader.getBlock({ blockNumber: transfer.blockNumber });
  return { receiver, receivedAt: isoTime(timestamp) };
}

describe('queries answer what /v1 answers for the same state', () => {
  let user: Address;
  let strategyId: string;
  let received: { receiver: Address; receivedAt: string };
  beforeAll(async () => {
    const agent = await chainAgent(sandbox, 'established');
    user = agent.agentAddress;
    await deposit(agent.apiKey, 'moderate', 25);
    await deposit(agent.apiKey, 'configurable', 10);
    const submitted = await call(sandbox, agent.apiKey, 'POST', '/api/v1/agent/strategy/submit', {
      name: 'Graph Momentum',
      description: 'a strategy for the GraphQL tests',
    });
    strategyId = submitted.json().strategy_id;
    for (const status of ['guardian_review', 'paper_trading', 'pending_oracle_approval', 'live']) {
      const moved = await admin(sandbox.app, 'POST', '/sandbox/strategies/status', {
        strategy_id: strategyId,
        status,
      });
      expect(moved.statusCode).toBe(200);
    }
    await admin(sandbox.app, 'POST', '/sandbox/clock/advance', { seconds: 3 * DAY });
    received = await positionByTransfer();
    // The state stands still from here: the fulfiller has claimed the ERC-7540 request (its
    // last block for it), and the transfer, made over the RPC URL, is indexed. The tests below
    // then read GraphQL and /v1 at the same block, without reading twice.
    const settled = await eventually(
      async () => ({
        mine: (await rest(`/v1/users/${user}/transactions`)).transactions,
        theirs: (await rest(`/v1/users/${received.receiver}/positions`)).positions,
      }),
      ({ mine, theirs }) => mine.some((tx: Body) => tx.type === 'claim') && theirs.length === 1,
      10_000,
    );
    expect(settled.mine.map((tx: Body) => [tx.type, tx.status])).toEqual([
      ['claim', 'claimed'],
      ['deposit_request', 'claimed'],
      ['deposit', 'fulfilled'],
    ]);
    expect(settled.theirs).toHaveLength(1);
  });

  it('vaults, with filters and order, and vault', async () => {
    const { body } = await gql(`{
      vaults(orderBy: TVL_DESC) {
        address name symbol tvl tvlUsd totalShares pricePerShare
        apy { current day7 day30 inception } fees { management performance hurdle }
        riskLevel strategies { id name status allocation apy riskScore sharpeRatio maxDrawdown }
        isERC7540 fulfillmentDelay createdAt
      }
      moderate: vaults(riskLevel: MODERATE, minTvl: "1") { address }
    }`);
    expect(body.errors).toBeUndefined();
    const list = await rest('/v1/vaults?orderBy=tvl_desc');
    expect(body.data.vaults.map((v: Body) => v.address)).toEqual(
      list.vaults.map((v: Body) => v.address),
    );
    for (const vault of body.data.vaults) {
      const detail = await rest(`/v1/vaults/${vault.address}`);
      expect(vault).toEqual({
        address: detail.address,
        name: detail.name,
        symbol: detail.symbol,
        tvl: detail.tvl,
        tvlUsd: detail.tvlUsd,
        totalShares: detail.totalShares,
        pricePerShare: detail.pricePerShare,
        apy: {
          current: detail.apy.current,
          day7: detail.apy['7d'],
          day30: detail.apy['30d'],
          inception: detail.apy.inception,
        },
        fees: detail.fees,
        riskLevel: detail.riskLevel.toUpperCase(),
        strategies: detail.strategies.map((s: Body) => expect.objectContaining({ id: s.id })),
        isERC7540: detail.isERC7540,
        fulfillmentDelay: detail.fulfillmentDelay,
        createdAt: detail.createdAt,
      });
    }
    const live = body.data.vaults.flatMap((v: Body) => v.strategies);
    expect(live.map((s: Body) => s.id)).toEqual([strategyId]);
    const filtered = await rest('/v1/vaults?riskLevel=moderate&minTvl=1');
    expect(body.data.moderate.map((v: Body) => v.address)).toEqual(
      filtered.vaults.map((v: Body) => v.address),
    );
    expect(body.data.moderate.length).toBeGreaterThan(0);

    const one = await gql(`query ($a: String!) { vault(address: $a) { address tvl } }`, {
      a: vaultOf('moderate').toLowerCase(),
    });
    const detail = await rest(`/v1/vaults/${vaultOf('moderate')}`);
    expect(one.body.data.vault).toEqual({ address: detail.address, tvl: detail.tvl });
  });

  it('vaultHistory', async () => {
    const { body } = await gql(
      `query ($a: String!) { vaultHistory(address: $a, period: WEEK, interval: DAY) { timestamp tvl apy pricePerShare } }`,
      { a: vaultOf('moderate') },
    );
    const history = await rest(`/v1/vaults/${vaultOf('moderate')}/history?period=7d&interval=1d`);
    expect(body.data.vaultHistory).toEqual(history.points);
    expect(history.points.length).toBeGreaterThanOrEqual(3);
  });

  it('strategies and strategy', async () => {
    // A bound just under the strategy's own Sharpe ratio, which its simulated series sets
    // (three days of returns may give any value): the filter must keep it.
    const all = await rest('/v1/strategies?status=live');
    const ours = all.strategies.find((s: Body) => s.id === strategyId);
    const minSharpe = Math.floor(ours.sharpeRatio) - 1;
    const { body } = await gql(
      `query ($id: ID!, $min: Float!) {
      strategies(status: LIVE, minSharpe: $min) { id name status allocation apy riskScore sharpeRatio maxDrawdown }
      strategy(id: $id) { id name status allocation apy riskScore sharpeRatio maxDrawdown }
    }`,
      { id: strategyId, min: minSharpe },
    );
    expect(body.errors).toBeUndefined();
    const listed = await rest(`/v1/strategies?status=live&minSharpe=${minSharpe}`);
    const shape = (s: Body) => ({
      id: s.id,
      name: s.name,
      status: s.status.toUpperCase(),
      allocation: s.allocation,
      apy: s.apy,
      riskScore: s.riskScore,
      sharpeRatio: s.sharpeRatio,
      maxDrawdown: s.maxDrawdown,
    });
    expect(body.data.strategies).toEqual(listed.strategies.map(shape));
    expect(body.data.strategy).toEqual(
      shape(listed.strategies.find((s: Body) => s.id === strategyId)),
    );
  });

  it('userPositions and userTransactions (paged, filtered)', async () => {
    const { body } = await gql(
      `query ($u: String!) {
      userPositions(address: $u) { vault { address name } shares value pnl pnlPercent depositedAt }
      userTransactions(address: $u, limit: 1, offset: 1) { hash type vault { address } user amount shares status timestamp }
      deposits: userTransactions(address: $u, type: DEPOSIT_REQUEST) { hash status }
    }`,
      { u: user },
    );
    expect(body.errors).toBeUndefined();
    const positions = await rest(`/v1/users/${user}/positions`);
    // Every position here is deposited (the ERC-7540 request was claimed): each is dated in
    // /v1, and GraphQL gives the same date.
    expect(positions.positions.map((p: Body) => p.depositedAt)).toEqual([
      expect.stringMatching(/^20\d\d-/),
      expect.stringMatching(/^20\d\d-/),
    ]);
    expect(body.data.userPositions).toEqual(
      positions.positions.map((p: Body) => ({
        vault: { address: p.vault, name: p.vaultName },
        shares: p.shares,
        value: p.value,
        pnl: p.pnl,
        pnlPercent: p.pnlPercent,
        depositedAt: p.depositedAt,
      })),
    );
    // Shares received by a transfer: dated by the transfer's block, in both.
    const { receiver, receivedAt } = received;
    const theirs = await gql(
      `query ($u: String!) { userPositions(address: $u) { shares depositedAt } }`,
      { u: receiver },
    );
    expect(theirs.body.errors).toBeUndefined();
    expect(theirs.body.data.userPositions).toEqual([
      { shares: '4000000', depositedAt: receivedAt },
    ]);
    expect((await rest(`/v1/users/${receiver}/positions`)).positions).toEqual([
      expect.objectContaining({ shares: '4000000', depositedAt: receivedAt }),
    ]);
    const page = await rest(`/v1/users/${user}/transactions?limit=1&offset=1`);
    expect(body.data.userTransactions).toEqual(
      page.transactions.map((t: Body) => ({
        hash: t.hash,
        type: t.type.toUpperCase(),
        vault: { address: t.vault },
        user: t.user,
        amount: t.amount,
        shares: t.shares,
        status: t.status.toUpperCase(),
        timestamp: t.timestamp,
      })),
    );
    const requests = await rest(`/v1/users/${user}/transactions?type=deposit_request`);
    expect(body.data.deposits).toEqual(
      requests.transactions.map((t: Body) => ({ hash: t.hash, status: t.status.toUpperCase() })),
    );
    expect(body.data.deposits).toHaveLength(1);
  });

  it('protocolStats and nodeStats', async () => {
    // The state stands still (see beforeAll): one read of each, at the same block.
    const head = Number(await reader.getBlockNumber({ cacheTime: 0 }));
    const from = Math.floor(sandbox.clock.nowSeconds());
    const { body } = await gql(`{
      protocolStats { totalTvl totalTvlUsd vaults strategies liveStrategies agents users transactions volume24h blockNumber updatedAt }
      nodeStats { total online offline latestBlock nodes { id name operator status blockNumber lastSeen version } }
    }`);
    const nodes = (await rest('/v1/nodes')).nodes;
    const to = Math.floor(sandbox.clock.nowSeconds());
    expect(body.errors).toBeUndefined();
    const stats = await rest('/v1/protocol/stats');
    expect(stats.blockNumber).toBe(head);
    expect(body.data.protocolStats).toEqual(stats);
    // The sandbox's own node reports the chain's head, seen now (in sandbox seconds: the
    // clock may tick between the two reads); the others as /v1 lists them.
    const seenNow = Array.from({ length: to - from + 1 }, (_, i) => isoTime(from + i));
    expect(nodes.find((n: Body) => n.id === 'sandbox')).toMatchObject({ blockNumber: head });
    const { nodes: listed, ...counts } = body.data.nodeStats;
    expect(counts).toEqual({
      total: nodes.length,
      online: nodes.filter((n: Body) => n.status === 'online').length,
      offline: nodes.filter((n: Body) => n.status === 'offline').length,
      latestBlock: head,
    });
    expect(listed).toEqual(
      nodes.map((n: Body) => ({
        id: n.id,
        name: n.name,
        operator: n.operator,
        status: n.status.toUpperCase(),
        blockNumber: n.blockNumber,
        lastSeen: n.id === 'sandbox' ? expect.toBeOneOf(seenNow) : n.lastSeen,
        version: n.version,
      })),
    );
    expect(seenNow).toContain(nodes.find((n: Body) => n.id === 'sandbox').lastSeen);
  });
});

/** Sets an indexed transaction's amount behind the index's back, on a connection of its own. */
async function amountSetter(sandbox: TestSandbox) {
  if (sandbox.database) {
    const client = new pg.Client({ connectionString: sandbox.database });
    await client.connect();
    return {
      async set(amount: string, hash: string) {
        const sql = 'UPDATE sandbox_index.transactions SET amount = $1 WHERE hash = $2';
        expect((await client.query(sql, [amount, hash])).rowCount).toBe(1);
      },
      close: () => client.end(),
    };
  }
  const index = new DatabaseSync(join(sandbox.dir, 'index.db'), { timeout: 5000 });
  const update = index.prepare('UPDATE transactions SET amount = ? WHERE hash = ?');
  return {
    async set(amount: string, hash: string) {
      expect(update.run(amount, hash).changes).toBe(1);
    },
    async close() {
      index.close();
    },
  };
}

describe('answers kept between index commits', () => {
  it('a repeated query answers the same until a write moves the index, then the new state', async () => {
    const agent = await chainAgent(sandbox);
    await deposit(agent.apiKey, 'conservative', 3);
    const query = `query ($a: String!, $u: String!) {
      vault(address: $a) { tvl totalShares }
      userTransactions(address: $u) { hash amount }
    }`;
    const variables = { a: vaultOf('conservative'), u: agent.agentAddress };
    const first = await gql(query, variables);
    expect(first.body.data.userTransactions).toEqual([
      { hash: expect.any(String), amount: '3000000' },
    ]);
    // A row changed under the index, which no commit reports: an answer built again would
    // show it, a kept one does not. The row is put back before the next commit.
    // (On a connection of its own: the index's readers' is read-only, its writer its own.)
    const tamper = await amountSetter(sandbox);
    const { hash } = first.body.data.userTransactions[0];
    await tamper.set('1', hash);
    try {
      expect((await gql(query, variables)).body).toEqual(first.body);
    } finally {
      await tamper.set('3000000', hash);
      await tamper.close();
    }
    await deposit(agent.apiKey, 'conservative', 7);
    const after = await gql(query, variables);
    const detail = await rest(`/v1/vaults/${vaultOf('conservative')}`);
    expect(after.body.data.vault).toEqual({ tvl: detail.tvl, totalShares: detail.totalShares });
    expect(BigInt(after.body.data.vault.tvl) - BigInt(first.body.data.vault.tvl)).toBe(7_000_000n);
    expect(after.body.data.userTransactions.map((tx: Body) => tx.amount)).toEqual([
      '7000000',
      '3000000',
    ]);
  });

  it('never keeps nodeStats, which reports live nodes', async () => {
    const added = await admin(sandbox.app, 'POST', '/sandbox/nodes', {
      name: 'GraphQL node',
      operator_address: `0x${'cd'.repeat(20)}`,
    });
    const { node_id, node_key } = added.json();
    const query = '{ nodeStats { online nodes { id status } } }';
    const statusOf = (body: Body) =>
      body.data.nodeStats.nodes.find((node: Body) => node.id === node_id).status;
    expect(statusOf((await gql(query)).body)).toBe('OFFLINE');
    // Using the key marks the node as seen: nothing the index holds changes.
    const seen = await sandbox.app.inject({
      url: '/v1/vaults',
      headers: { 'x-api-key': node_key },
    });
    expect(seen.statusCode).toBe(200);
    expect(statusOf((await gql(query)).body)).toBe('ONLINE');
  });
});

describe('errors have the standard shape', () => {
  const standard = (error: Body, code: string) => {
    expect(error).toEqual(
      expect.objectContaining({
        message: expect.any(String),
        locations: expect.any(Array),
        extensions: expect.objectContaining({ code }),
      }),
    );
  };

  it('an unknown vault is null with NOT_FOUND', async () => {
    const { status, body } = await gql(
      '{ vault(address: "0x00000000000000000000000000000000000000aa") { name } }',
    );
    expect(status).toBe(200);
    expect(body.data).toEqual({ vault: null });
    standard(body.errors[0], 'NOT_FOUND');
    expect(body.errors[0].path).toEqual(['vault']);
    expect(body.errors[0].locations).toEqual([{ line: 1, column: 3 }]);
  });

  it('a bad address, enum, limit or variable is BAD_USER_INPUT', async () => {
    const cases = [
      '{ vault(address: "0x123") { name } }',
      '{ vaults(riskLevel: EXTREME) { name } }',
      '{ userTransactions(address: "0x00000000000000000000000000000000000000aa", limit: 500) { hash } }',
      '{ vaultHistory(address: "0x00000000000000000000000000000000000000aa", period: DECADE, interval: DAY) { tvl } }',
      '{ vaults(minTvl: "lots") { name } }',
    ];
    for (const query of cases) {
      const { body } = await gql(query);
      standard(body.errors[0], 'BAD_USER_INPUT');
      expect(body.errors[0].path, query).toEqual([expect.any(String)]);
    }
    const missing = await gql('query ($a: String!) { vault(address: $a) { name } }', {});
    standard(missing.body.errors[0], 'BAD_USER_INPUT');
    expect(missing.status).toBe(400);
  });

  it('a syntax error, an unknown field, and no query at all', async () => {
    standard((await gql('{ vaults { name ')).body.errors[0], 'GRAPHQL_PARSE_FAILED');
    standard((await gql('{ vaults { colour } }')).body.errors[0], 'GRAPHQL_VALIDATION_FAILED');
    const empty = await sandbox.app.inject({ method: 'POST', url: '/graphql', payload: {} });
    expect(empty.statusCode).toBe(400);
    standard(empty.json().errors[0], 'BAD_USER_INPUT');
  });
});

describe('limits', () => {
  it('refuses a document too deep, with too many aliases, or too costly', async () => {
    let deep = 'name';
    for (let i = 0; i < 16; i++) deep = `ofType { ${deep} }`;
    const tooDeep = await gql(`{ __schema { types { fields { type { ${deep} } } } } }`);
    expect(tooDeep.status).toBe(400);
    expect(tooDeep.body.errors[0].extensions.code).toBe('QUERY_TOO_COMPLEX');
    expect(tooDeep.body.errors[0].message).toMatch(/levels deep; at most 16/);
    // GraphiQL's own introspection query passes.
    expect((await gql(getIntrospectionQuery())).body.errors).toBeUndefined();

    const aliases = Array.from({ length: 21 }, (_, i) => `a${i}: protocolStats { vaults }`);
    const tooMany = await gql(`{ ${aliases.join(' ')} }`);
    expect(tooMany.body.errors[0].extensions.code).toBe('QUERY_TOO_COMPLEX');
    expect(tooMany.body.errors[0].message).toMatch(/21 aliases/);

    const user = '"0x00000000000000000000000000000000000000aa"';
    const page = `userTransactions(address: ${user}, limit: 100) { vault { strategies { id } } }`;
    expect((await gql(`{ ${page} }`)).body.errors).toBeUndefined();
    const costly = await gql(`{ a: ${page} b: ${page} }`);
    expect(costly.body.errors[0].extensions.code).toBe('QUERY_TOO_COMPLEX');
    expect(costly.body.errors[0].message).toMatch(/costs 20400/);
  });

  it('measures a fragment spread many times once (40 fragments, each spreading the next twice)', async () => {
    const fragments = Array.from(
      { length: 40 },
      (_, i) => `fragment F${i} on Query { ...F${i + 1} ...F${i + 1} }`,
    ).join(' ');
    // Walked spread by spread, each is 2^40 visits: the server would never answer.
    const free = await gql(`{ ...F0 } ${fragments} fragment F40 on Query { __typename }`);
    expect(free.status).toBe(200);
    expect(free.body).toEqual({ data: { __typename: 'Query' } });
    // A field at the bottom counts every time it is spread: 2^40 times.
    const costly = await gql(
      `{ ...F0 } ${fragments} fragment F40 on Query { protocolStats { vaults } }`,
    );
    expect(costly.body.errors[0].extensions.code).toBe('QUERY_TOO_COMPLEX');
    expect(costly.body.errors[0].message).toMatch(/costs 1099511627776/);
  });

  it('answers a subscription sent over HTTP with BAD_USER_INPUT, not a server error', async () => {
    const { status, body } = await gql('subscription { transactionCreated { hash } }');
    expect(status).toBe(400);
    expect(body.errors[0]).toEqual(
      expect.objectContaining({
        message: expect.stringMatching(/WebSocket/),
        locations: expect.any(Array),
        extensions: expect.objectContaining({ code: 'BAD_USER_INPUT' }),
      }),
    );
  });

  it('refuses variables that are not an object, or an operationName that is not a string', async () => {
    const query = '{ protocolStats { vaults } }';
    for (const payload of [
      { query, variables: 'x' },
      { query, variables: 5 },
      { query, variables: [1] },
      { query, operationName: 5 },
    ]) {
      const response = await sandbox.app.inject({ method: 'POST', url: '/graphql', payload });
      expect(response.statusCode, JSON.stringify(payload)).toBe(400);
      expect(response.json().errors[0].extensions.code).toBe('BAD_USER_INPUT');
    }
    for (const variables of ['5', 'not json']) {
      const response = await sandbox.app.inject({
        url: `/graphql?query=${encodeURIComponent(query)}&variables=${encodeURIComponent(variables)}`,
      });
      expect(response.statusCode, variables).toBe(400);
      expect(response.json().errors[0].extensions.code).toBe('BAD_USER_INPUT');
    }
  });

  it('says what a scalar literal of the wrong kind was, in GraphQL’s words', async () => {
    const { status, body } = await gql('{ vaults(minTvl: 1.5) { name } }');
    expect(status).toBe(400);
    expect(body.errors[0].extensions.code).toBe('BAD_USER_INPUT');
    expect(body.errors[0].message).toMatch(/got 1\.5$/);
    expect(body.errors[0].message).not.toMatch(/kind|FloatValue/);
  });

  it('refuses a query that is JSON (mercurius would take it for an AST), not a server error', async () => {
    const ast = JSON.stringify(parse('{ protocolStats { vaults } }'));
    for (const query of ['" "', '[]', '{}', '7', ast]) {
      const { status, body } = await gql(query);
      expect(status, query).toBe(400);
      expect(body.errors[0].extensions.code, query).toBe('BAD_USER_INPUT');
    }
  });
});

describe('GraphiQL', () => {
  it('is served to a browser at GET /graphql; GET with a query still answers JSON', async () => {
    const page = await sandbox.app.inject({ url: '/graphql', headers: { accept: 'text/html' } });
    expect(page.statusCode).toBe(200);
    expect(page.headers['content-type']).toMatch(/text\/html/);
    expect(page.body).toContain('GraphiQL');
    const query = await sandbox.app.inject({ url: '/graphql?query={protocolStats{vaults}}' });
    expect(query.json()).toEqual({ data: { protocolStats: { vaults: 6 } } });
  });
});

describe('subscriptions over graphql-transport-ws', () => {
  const VAULT_FIELDS = 'address tvl pricePerShare totalShares apy { current }';

  it('a Part A deposit yields transactionCreated and vaultUpdated within a second, with the chain’s values', async () => {
    await noSubscriptionsLeft();
    const agent = await chainAgent(sandbox);
    const client = connect();
    const vault = vaultOf('aggressive');
    const updates = subscription(
      client,
      `subscription ($v: String!) { vaultUpdated(address: $v) { ${VAULT_FIELDS} } }`,
      { v: vault },
    );
    const created = subscription(
      client,
      'subscription { transactionCreated { hash type amount user timestamp status vault { address } } }',
    );
    await eventually(graphqlInfo, (info) => info.subscriptions >= 2);
    const { tx, answeredAt } = await deposit(agent.apiKey, 'aggressive', 7);
    const update = await updates.next(1000);
    // Other vaults' transactions (the fulfiller's, say) may come first: this one comes in 1 s.
    let transaction = await created.next(1000);
    while (transaction.data.transactionCreated.hash !== tx) {
      transaction = await created.next(1000 - (performance.now() - answeredAt));
    }
    expect(performance.now() - answeredAt).toBeLessThan(1000);
    const receipt = await reader.getTransactionReceipt({ hash: tx as `0x${string}` });
    // The chain's values at the deposit's block.
    const read = (functionName: string, args?: [bigint]) =>
      reader.readContract({
        address: vault,
        abi: VAULT_ABI,
        functionName,
        args,
        blockNumber: receipt.blockNumber,
      } as never);
    expect(update.data.vaultUpdated).toEqual({
      address: vault,
      tvl: String(await read('totalAssets')),
      totalShares: String(await read('totalSupply')),
      pricePerShare: String(await read('convertToAssets', [1_000_000n])),
      apy: { current: expect.any(Number) },
    });
    const block = await reader.getBlock({ blockNumber: receipt.blockNumber });
    expect(transaction.data.transactionCreated).toEqual({
      hash: tx,
      type: 'DEPOSIT',
      amount: '7000000',
      user: agent.agentAddress,
      timestamp: new Date(Number(block.timestamp) * 1000).toISOString().replace('.000Z', 'Z'),
      status: 'FULFILLED',
      vault: { address: vault },
    });
    updates.stop();
    created.stop();
  });

  it('a subscriber filtered to one vault hears nothing of another', async () => {
    await noSubscriptionsLeft();
    const agent = await chainAgent(sandbox);
    const client = connect();
    const moderate = subscription(
      client,
      'subscription ($v: String) { transactionCreated(vaultAddress: $v) { hash vault { address } } }',
      { v: vaultOf('moderate') },
    );
    const conservative = subscription(
      client,
      `subscription ($v: String!) { vaultUpdated(address: $v) { address } }`,
      { v: vaultOf('conservative') },
    );
    await eventually(graphqlInfo, (info) => info.subscriptions >= 2);
    await deposit(agent.apiKey, 'conservative', 3);
    expect((await conservative.next()).data.vaultUpdated.address).toBe(vaultOf('conservative'));
    const { tx } = await deposit(agent.apiKey, 'moderate', 4);
    const first = await moderate.next();
    // The first event it gets is the moderate deposit: the conservative one never came.
    expect(first.data.transactionCreated).toEqual({
      hash: tx,
      vault: { address: vaultOf('moderate') },
    });
    expect(conservative.pending()).toBe(0);
    moderate.stop();
    conservative.stop();
  });

  it('advancing the clock yields vaultUpdated (the vaults accrue their yield)', async () => {
    await noSubscriptionsLeft();
    const client = connect();
    const vault = vaultOf('moderate');
    const updates = subscription(
      client,
      `subscription ($v: String!) { vaultUpdated(address: $v) { tvl pricePerShare } }`,
      { v: vault },
    );
    await eventually(graphqlInfo, (info) => info.subscriptions >= 1);
    const before = await rest(`/v1/vaults/${vault}`);
    const advanced = await admin(sandbox.app, 'POST', '/sandbox/clock/advance', {
      seconds: 30 * DAY,
    });
    expect(advanced.statusCode).toBe(200);
    const update = (await updates.next()).data.vaultUpdated;
    expect(BigInt(update.tvl)).toBeGreaterThan(BigInt(before.tvl));
    expect(BigInt(update.pricePerShare)).toBeGreaterThan(BigInt(before.pricePerShare));
    expect(update.tvl).toBe(
      String(
        await reader.readContract({ address: vault, abi: VAULT_ABI, functionName: 'totalAssets' }),
      ),
    );
    updates.stop();
  });

  it('a stalled subscriber blocks no one, and closing a socket frees its subscriptions', async () => {
    const agent = await chainAgent(sandbox);
    const baseline = (await graphqlInfo()).subscriptions;
    // A client that subscribes and then stops reading its socket.
    const stalled = new WebSocket(wsUrl, 'graphql-transport-ws');
    await new Promise((resolve) => stalled.once('open', resolve));
    stalled.send(JSON.stringify({ type: 'connection_init' }));
    await new Promise((resolve) => stalled.once('message', resolve));
    for (const id of ['1', '2', '3']) {
      stalled.send(
        JSON.stringify({
          id,
          type: 'subscribe',
          payload: {
            query: `subscription { transactionCreated { hash vault { ${VAULT_FIELDS} strategies { id name } } } }`,
          },
        }),
      );
    }
    await eventually(graphqlInfo, (info) => info.subscriptions >= baseline + 3);
    (stalled as unknown as { _socket: { pause(): void } })._socket.pause();

    const client = connect();
    const live = subscription(client, 'subscription { transactionCreated { hash } }');
    await eventually(graphqlInfo, (info) => info.subscriptions >= baseline + 4);
    for (let i = 0; i < 5; i++) {
      const { tx } = await deposit(agent.apiKey, 'conservative', 1);
      expect((await live.next(1000)).data.transactionCreated.hash).toBe(tx);
    }
    stalled.terminate();
    await client.dispose();
    const after = await eventually(graphqlInfo, (info) => info.subscriptions === baseline);
    expect(after.subscriptions).toBe(baseline);
  });

  it('caps subscriptions per socket, and answers a bad subscription with an error', async () => {
    await noSubscriptionsLeft();
    const client = connect();
    const open = [1, 2, 3].map(() =>
      subscription(client, 'subscription { transactionCreated { hash } }'),
    );
    await eventually(graphqlInfo, (info) => info.subscriptions >= 3);
    const fourth = subscription(client, 'subscription { transactionCreated { hash } }');
    await eventually(
      async () => fourth.failure(),
      (failure) => failure !== undefined,
    );
    expect(fourth.failure()).toEqual([
      expect.objectContaining({
        message: expect.stringMatching(/at most 3 subscriptions/),
        extensions: { code: 'BAD_USER_INPUT' },
      }),
    ]);
    const unknown = subscription(
      client,
      'subscription { vaultUpdated(address: "0x00000000000000000000000000000000000000aa") { tvl } }',
    );
    for (const s of open) s.stop();
    await eventually(
      async () => unknown.failure(),
      (failure) => failure !== undefined,
    );
    expect(unknown.failure()).toEqual([
      expect.objectContaining({ path: ['vaultUpdated'], extensions: { code: 'NOT_FOUND' } }),
    ]);
  });

  it('answers every bad subscribe on a socket with errors in the standard shape, each with a code', async () => {
    const socket = new WebSocket(wsUrl, 'graphql-transport-ws');
    const frames: Body[] = [];
    socket.on('message', (data) => frames.push(JSON.parse(String(data))));
    await new Promise((resolve) => socket.once('open', resolve));
    socket.send(JSON.stringify({ type: 'connection_init', payload: {} }));
    await eventually(
      async () => frames.length,
      (n) => n > 0,
    );
    expect(frames[0]?.type).toBe('connection_ack');
    const subscribe = (id: string, payload: unknown) =>
      socket.send(JSON.stringify({ id, type: 'subscribe', payload }));
    subscribe('syntax', { query: 'subscription { transactionCreated { hash ' });
    subscribe('unknown-field', { query: 'subscription { transactionCreated { colour } }' });
    subscribe('bad-variable', {
      query: 'subscription ($v: String!) { vaultUpdated(address: $v) { tvl } }',
      variables: { v: 7 },
    });
    const errorOf = (id: string) =>
      frames.find((frame) => frame.id === id && frame.type === 'error');
    await eventually(
      async () => ['syntax', 'unknown-field', 'bad-variable'].every((id) => errorOf(id)),
      (all) => all,
    );
    const codes = Object.fromEntries(
      ['syntax', 'unknown-field', 'bad-variable'].map((id) => {
        const [error] = (errorOf(id)?.payload ?? []) as Body[];
        expect(error).toEqual(
          expect.objectContaining({
            message: expect.any(String),
            locations: expect.any(Array),
            path: expect.any(Array),
          }),
        );
        return [id, error?.extensions?.code];
      }),
    );
    expect(codes).toEqual({
      syntax: 'GRAPHQL_PARSE_FAILED',
      'unknown-field': 'GRAPHQL_VALIDATION_FAILED',
      'bad-variable': 'BAD_USER_INPUT',
    });
    // Nothing was kept for them.
    expect((await graphqlInfo()).subscriptions).toBe(0);
    // A query sent as an object (an AST) would skip the checks: the socket is closed.
    const closed = new Promise<number>((resolve) => socket.once('close', resolve));
    subscribe('ast', { query: parse('subscription { transactionCreated { hash } }') });
    expect(await closed).toBe(4400);
    expect((await graphqlInfo()).subscriptions).toBe(0);
  });

  it('closes a socket whose message the protocol does not allow with 4400, and says why', async () => {
    const malformed: Array<[string, unknown]> = [
      ['not JSON', 'not json'],
      [
        'unknown message type',
        { type: 'start', id: '1', payload: { query: '{ vaults { name } }' } },
      ],
      ['subscribe needs an id', { type: 'subscribe', payload: { query: 'subscription { x }' } }],
      ['subscribe needs a payload', { type: 'subscribe', id: '1' }],
      ['as a string', { type: 'subscribe', id: '1', payload: { query: 5 } }],
      [
        'as a string',
        { type: 'subscribe', id: '1', payload: { query: { kind: 'Document', definitions: [] } } },
      ],
      [
        'variables must be an object',
        { type: 'subscribe', id: '1', payload: { query: 'subscription { a }', variables: [1] } },
      ],
    ];
    for (const [why, message] of malformed) {
      const socket = new WebSocket(wsUrl, 'graphql-transport-ws');
      const frames: string[] = [];
      socket.on('message', (data) => frames.push(String(data)));
      await new Promise((resolve) => socket.once('open', resolve));
      socket.send(JSON.stringify({ type: 'connection_init', payload: {} }));
      socket.send(typeof message === 'string' ? message : JSON.stringify(message));
      const [code, reason] = await new Promise<[number, string]>((resolve) =>
        socket.once('close', (closeCode, closeReason) => resolve([closeCode, String(closeReason)])),
      );
      expect(code, why).toBe(4400);
      expect(reason, why).toContain(why);
      expect(
        frames.filter((frame) => !/"type":"(connection_ack|ping)"/.test(frame)),
        why,
      ).toEqual([]);
    }
    expect((await graphqlInfo()).subscriptions).toBe(0);
  });

  it('a missing argument on a socket has the field’s path, as over HTTP', async () => {
    const client = connect();
    const missing = subscription(client, 'subscription { vaultUpdated { tvl } }');
    await eventually(
      async () => missing.failure(),
      (failure) => failure !== undefined,
    );
    const http = await gql('{ vault { name } }');
    expect(http.body.errors[0].path).toEqual(['vault']);
    expect(missing.failure()).toEqual([
      expect.objectContaining({
        path: ['vaultUpdated'],
        extensions: expect.objectContaining({ code: 'BAD_USER_INPUT' }),
      }),
    ]);
  });

  it('closes a socket that sends no connection_init (4408), or a key that is none (4403)', async () => {
    const silent = new WebSocket(wsUrl, 'graphql-transport-ws');
    const code = await new Promise<number>((resolve) => silent.once('close', resolve));
    expect(code).toBe(4408);

    const forged = new WebSocket(wsUrl, 'graphql-transport-ws');
    await new Promise((resolve) => forged.once('open', resolve));
    forged.send(JSON.stringify({ type: 'connection_init', payload: { apiKey: 'agent_forged' } }));
    const refused = await new Promise<number>((resolve) => forged.once('close', resolve));
    expect(refused).toBe(4403);

    const agent = await chainAgent(sandbox);
    const keyed = connect({ apiKey: agent.apiKey });
    const s = subscription(keyed, 'subscription { transactionCreated { hash } }');
    const { tx } = await deposit(agent.apiKey, 'conservative', 1);
    expect((await s.next()).data.transactionCreated.hash).toBe(tx);
    s.stop();
  });
});
