import { Writable } from 'node:stream';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { GRAPHQL_LIMITS } from '../../src/api/schemas/index.ts';
import { call, chainAgent, useChainSandbox } from '../helpers/chain.ts';
import { admin, createTestSandbox, type TestSandbox } from '../helpers/sandbox.ts';

/**
 * /graphql against hostile clients, on a real serve (app, SQLite, anvil) over real WebSockets:
 * a client that stops reading, one that never finishes its handshake, floods of unique or
 * error-heavy documents, many like subscriptions, and protocol abuse. Limits are lowered so
 * that each flood proves its bound quickly.
 */

const MAX_BUFFERED = 64 * 1024;
let sandbox: TestSandbox;
let wsUrl: string;
const logs: Array<{ level: number; msg: string }> = [];
const logStream = new Writable({
  write(chunk, _encoding, done) {
    for (const line of String(chunk).split('\n')) {
      if (line.trim()) logs.push(JSON.parse(line));
    }
    done();
  },
});
useChainSandbox(
  (started) => {
    sandbox = started;
  },
  {
    logger: { level: 'info', stream: logStream },
    graphqlLimits: { connectionInitTimeoutMs: 500, maxBufferedBytes: MAX_BUFFERED },
  },
);
beforeAll(async () => {
  const address = await sandbox.app.listen({ host: '127.0.0.1', port: 0 });
  wsUrl = `${address.replace(/^http/, 'ws')}/graphql`;
});

// biome-ignore lint/suspicious/noExplicitAny: GraphQL bodies are read field by field
type Body = any;

async function gql(query: string, headers: Record<string, string> = {}) {
  const response = await sandbox.app.inject({
    method: 'POST',
    url: '/graphql',
    headers,
    payload: { query },
  });
  return { status: response.statusCode, body: response.json() as Body };
}

async function graphqlInfo() {
  return (await admin(sandbox.app, 'GET', '/sandbox/info')).json().graphql as {
    sockets: number;
    subscriptions: number;
    distinct_subscriptions: number;
    events_sent: number;
    dropped: number;
  };
}

async function until<T>(read: () => Promise<T> | T, ok: (value: T) => boolean): Promise<T> {
  for (;;) {
    const value = await read();
    if (ok(value)) return value;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** A raw graphql-transport-ws client: every frame it received, and how it closed. */
function rawSocket(url: string, protocol: string | string[] = 'graphql-transport-ws') {
  const socket = new WebSocket(url, protocol);
  const frames: Body[] = [];
  socket.on('message', (data) => frames.push(JSON.parse(String(data))));
  const closed = new Promise<{ code: number; reason: string }>((resolve) =>
    socket.once('close', (code, reason) => resolve({ code, reason: String(reason) })),
  );
  const opened = new Promise<void>((resolve, reject) => {
    socket.once('open', () => resolve());
    socket.once('error', reject);
  });
  const send = (message: unknown) => socket.send(JSON.stringify(message));
  return {
    socket,
    frames,
    closed,
    opened,
    send,
    async init(payload?: unknown) {
      await opened;
      send({ type: 'connection_init', ...(payload !== undefined && { payload }) });
      await until(
        () => frames,
        (all) => all.some((frame) => frame.type === 'connection_ack'),
      );
    },
  };
}

/** Sends `messages` to `socket` in one TCP write: the server reads them in one chunk. */
function sendAtOnce(socket: WebSocket, messages: unknown[]): void {
  const frames = messages.flatMap((message) =>
    (
      WebSocket as unknown as { Sender: { frame(data: Buffer, options: object): Buffer[] } }
    ).Sender.frame(Buffer.from(JSON.stringify(message)), {
      fin: true,
      rsv1: false,
      opcode: 1,
      mask: true,
      readOnly: false,
    }),
  );
  (socket as unknown as { _socket: { write(data: Buffer): void } })._socket.write(
    Buffer.concat(frames),
  );
}

const sockets: WebSocket[] = [];
afterAll(() => {
  for (const socket of sockets) socket.terminate();
});

/** Runs the garbage collector (V8's flag, set at run time), then answers the heap in use. */
function heapAfterGc(): number {
  setFlagsFromString('--expose-gc');
  const gc = runInNewContext('gc') as () => void;
  gc();
  gc();
  return process.memoryUsage().heapUsed;
}

const VAULT_FIELDS = 'address name tvl tvlUsd totalShares pricePerShare apy { current day7 }';

describe('a client that stops reading (finding 1)', () => {
  it('is closed with 4499 once its unsent pongs pass the bound; what it was sent stays bounded', async () => {
    const client = rawSocket(wsUrl);
    sockets.push(client.socket);
    await client.init();
    const before = (await graphqlInfo()).dropped;
    // The client reads nothing more, and pings with a payload that the pong carries back.
    (client.socket as unknown as { _socket: { pause(): void; resume(): void } })._socket.pause();
    const payload = { pad: 'x'.repeat(16 * 1024) };
    let pings = 0;
    let closedByServer = false;
    void until(graphqlInfo, (info) => info.dropped > before).then(() => {
      closedByServer = true;
    });
    // Kernel buffers take a few megabytes first; then the server's own send buffer fills.
    while (!closedByServer && pings < 20_000) {
      for (let i = 0; i < 50; i++) client.send({ type: 'ping', payload });
      pings += 50;
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    expect(closedByServer).toBe(true);
    (client.socket as unknown as { _socket: { resume(): void } })._socket.resume();
    const { code, reason } = await client.closed;
    expect(code).toBe(4499);
    expect(reason).toMatch(/Too slow/);
    // Pongs carried the payload back, until the bound: not every ping had its pong.
    const pongs = client.frames.filter((frame) => frame.type === 'pong');
    expect(pongs[0]?.payload).toEqual(payload);
    expect(pongs.length).toBeLessThan(pings);
    expect(logs.some((line) => /does not read what it is sent/.test(line.msg))).toBe(true);
    expect(logs.filter((line) => line.level >= 50)).toEqual([]);
  });
});

describe('the handshake (finding 2)', () => {
  it('a connection_init holding "__proto__" is acknowledged or closed, never left open unacknowledged', async () => {
    const client = rawSocket(wsUrl);
    sockets.push(client.socket);
    await client.opened;
    client.socket.send('{"type":"connection_init","payload":{"__proto__":{"polluted":true}}}');
    // It is acknowledged (the payload is only data), or closed: never left open without one.
    let closed = false;
    void client.closed.then(() => {
      closed = true;
    });
    await until(
      () => client.frames.some((frame) => frame.type === 'connection_ack') || closed,
      (settled) => settled,
    );
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    client.socket.close();
  });

  it('closes a socket at the timeout unless connection_ack was sent, pings or not', async () => {
    const client = rawSocket(wsUrl);
    sockets.push(client.socket);
    await client.opened;
    const pinging = setInterval(() => client.send({ type: 'ping' }), 50);
    const { code } = await client.closed;
    clearInterval(pinging);
    expect(code).toBe(4408);
  });
});

describe('documents (findings 3, 4 and 5)', () => {
  it('keeps no parsed document: 150 unique 16 KiB documents leave the heap where it was', async () => {
    const padding = '#\n'.repeat(8000);
    const before = heapAfterGc();
    for (let i = 0; i < 150; i++) {
      const answer = await gql(`{ protocolStats { totalTvl } }\n# ${i}\n${padding}`);
      expect(answer.status).toBe(200);
    }
    const grown = heapAfterGc() - before;
    // Each document's AST, with its 8,000 comment tokens, is about a megabyte.
    expect(grown).toBeLessThan(40 * 1024 * 1024);
  });

  it('keeps one parsed document per distinct subscription, however many subscribe to it', async () => {
    const before = await graphqlInfo();
    const clients = Array.from({ length: 5 }, () => rawSocket(wsUrl));
    for (const client of clients) sockets.push(client.socket);
    await Promise.all(clients.map((client) => client.init()));
    // 500 fields (as many as graphql-js compares for merging): parsed with its locations, about
    // 300 KB; without them, held once for all, about 150 KB.
    const query = `subscription { transactionCreated { ${'hash '.repeat(500)}} }`;
    const heapBefore = heapAfterGc();
    const cap = GRAPHQL_LIMITS.maxSubscriptionsPerSocket;
    for (const client of clients) {
      for (let id = 0; id < cap; id++) {
        client.send({ id: String(id), type: 'subscribe', payload: { query } });
      }
    }
    await until(
      graphqlInfo,
      (info) => info.subscriptions === before.subscriptions + clients.length * cap,
    );
    const grown = heapAfterGc() - heapBefore;
    // A located parse kept per subscription would be about 30 MB.
    expect(grown).toBeLessThan(12 * 1024 * 1024);
    for (const client of clients) client.socket.close();
    await until(graphqlInfo, (info) => info.sockets === before.sockets);
  });

  it('answers a document with 100 validation errors with at most maxErrors of them', async () => {
    const fields = Array.from({ length: 100 }, (_, i) => `unknown${i}`).join(' ');
    const answer = await gql(`{ vaults { ${fields} } }`);
    expect(answer.status).toBe(400);
    expect(answer.body.errors.length).toBeLessThanOrEqual(GRAPHQL_LIMITS.maxErrors);
    expect(answer.body.errors[0]).toMatchObject({
      path: ['vaults', 'unknown0'],
      extensions: { code: 'GRAPHQL_VALIDATION_FAILED' },
    });
    expect(answer.body.errors.at(-1).message).toMatch(/Too many validation errors/);
  });
});

describe('many like subscriptions (finding 7)', () => {
  it('executes an event once per distinct document and variables, and every subscriber has it', async () => {
    const agent = await chainAgent(sandbox);
    const clients = Array.from({ length: 10 }, () => rawSocket(wsUrl));
    for (const client of clients) sockets.push(client.socket);
    await Promise.all(clients.map((client) => client.init()));
    const before = await graphqlInfo();
    const vault = sandbox.chain.deployment.vaults.conservative.toLowerCase();
    for (const client of clients) {
      for (let id = 0; id < 20; id++) {
        client.send({
          id: String(id),
          type: 'subscribe',
          payload: {
            query: `subscription ($v: String!) { vaultUpdated(address: $v) { ${VAULT_FIELDS} strategies { id name } } }`,
            // Two distinct variable sets (the same vault, written in two cases).
            variables: { v: id % 2 === 0 ? vault : vault.toUpperCase().replace('0X', '0x') },
          },
        });
      }
    }
    const live = await until(
      graphqlInfo,
      (info) => info.subscriptions >= before.subscriptions + 200,
    );
    expect(live.distinct_subscriptions - before.distinct_subscriptions).toBe(2);
    const deposit = await call(sandbox, agent.apiKey, 'POST', '/api/v1/agent/vault/deposit', {
      vault_id: 'conservative',
      amount_usdc: 2,
    });
    expect(deposit.statusCode).toBe(200);
    const events = (client: ReturnType<typeof rawSocket>) =>
      client.frames.filter((frame) => frame.type === 'next');
    await until(
      () => clients,
      (all) => all.every((client) => events(client).length >= 20),
    );
    const first = events(clients[0] as ReturnType<typeof rawSocket>)[0];
    expect(first.payload.data.vaultUpdated.address.toLowerCase()).toBe(vault);
    for (const client of clients) {
      for (const event of events(client)) {
        expect(event.payload).toEqual(first.payload);
      }
    }
    for (const client of clients) client.socket.close();
    await until(graphqlInfo, (info) => info.subscriptions === before.subscriptions);
  });
});

describe('protocol hygiene (finding 8)', () => {
  it('closes a socket that subscribes twice with a live id with 4409, ending what it had', async () => {
    const before = await graphqlInfo();
    const client = rawSocket(wsUrl);
    sockets.push(client.socket);
    await client.init();
    const subscribe = {
      id: 'same',
      type: 'subscribe',
      payload: { query: 'subscription { transactionCreated { hash } }' },
    };
    client.send(subscribe);
    client.send(subscribe);
    const { code, reason } = await client.closed;
    expect(code).toBe(4409);
    expect(reason).toMatch(/already exists/);
    // What it had ends with it.
    await until(graphqlInfo, (info) => info.sockets === before.sockets);
    expect((await graphqlInfo()).subscriptions).toBe(before.subscriptions);
  });

  it('a subscribe completed and subscribed again before it started leaves nothing behind, and the cap holds', async () => {
    const before = await graphqlInfo();
    const client = rawSocket(wsUrl);
    sockets.push(client.socket);
    await client.init();
    const subscribe = (id: string, query = 'subscription { transactionCreated { hash } }') => ({
      id,
      type: 'subscribe',
      payload: { query },
    });
    const cap = GRAPHQL_LIMITS.maxSubscriptionsPerSocket;
    const messages: unknown[] = [];
    for (let i = 0; i < cap + 5; i++) {
      messages.push(subscribe(`s${i}`), { id: `s${i}`, type: 'complete' }, subscribe(`s${i}`));
    }
    // Checked after the others (their rate counts resolve in order): its error marks the end.
    messages.push(subscribe('last', 'subscription { unknownField }'));
    sendAtOnce(client.socket, messages);
    await until(
      () => client.frames,
      (frames) => frames.some((frame) => frame.id === 'last' && frame.type === 'error'),
    );
    const during = await graphqlInfo();
    expect(during.subscriptions - before.subscriptions).toBeLessThanOrEqual(cap);
    client.socket.close();
    await until(graphqlInfo, (info) => info.sockets === before.sockets);
    const after = await graphqlInfo();
    expect(after.subscriptions).toBe(before.subscriptions);
    expect(after.distinct_subscriptions).toBe(before.distinct_subscriptions);
    expect(logs.filter((line) => line.level >= 50)).toEqual([]);
  });

  it('answers a document whose operation cannot be chosen with BAD_USER_INPUT, never an internal TypeError', async () => {
    const client = rawSocket(wsUrl);
    sockets.push(client.socket);
    await client.init();
    client.send({
      id: 'two',
      type: 'subscribe',
      payload: {
        query:
          'subscription A { transactionCreated { hash } } subscription B { transactionCreated { type } }',
      },
    });
    client.send({
      id: 'unnamed',
      type: 'subscribe',
      payload: { query: 'subscription A { transactionCreated { hash } }', operationName: 'Z' },
    });
    const errorOf = (id: string) =>
      client.frames.find((frame) => frame.id === id && frame.type === 'error');
    await until(
      () => client.frames,
      () => errorOf('two') !== undefined && errorOf('unnamed') !== undefined,
    );
    for (const id of ['two', 'unnamed']) {
      const [error] = errorOf(id).payload;
      expect(error.extensions.code).toBe('BAD_USER_INPUT');
      expect(error.message).not.toMatch(/Cannot read properties/);
    }
    client.socket.close();
    const get = await sandbox.app.inject({
      method: 'GET',
      url: `/graphql?query=${encodeURIComponent('query A { protocolStats { totalTvl } }')}&operationName=B`,
    });
    expect(get.statusCode).toBe(400);
    expect(get.json().errors[0]).toMatchObject({ extensions: { code: 'BAD_USER_INPUT' } });
    expect(logs.filter((line) => line.level >= 50)).toEqual([]);
  });

  it('refuses the legacy graphql-ws subprotocol and any other before the upgrade, logging at info', async () => {
    const written: string[] = [];
    const write = process.stdout.write.bind(process.stdout);
    process.stdout.write = ((chunk: string | Uint8Array, ...rest: never[]) => {
      written.push(String(chunk));
      return write(chunk, ...rest);
    }) as typeof process.stdout.write;
    try {
      for (const protocol of ['graphql-ws', 'chat']) {
        const client = rawSocket(wsUrl, protocol);
        const status = await new Promise<number>((resolve) => {
          client.socket.once('unexpected-response', (_request, response) =>
            resolve(response.statusCode ?? 0),
          );
          client.socket.once('open', () => resolve(101));
        });
        client.opened.catch(() => {});
        expect(status, protocol).toBe(400);
      }
    } finally {
      process.stdout.write = write;
    }
    expect(written.filter((line) => /websocket protocol/i.test(line))).toEqual([]);
    expect(logs.filter((line) => line.level >= 50)).toEqual([]);
  });

  it('logs an oversize frame at info: the client’s mistake, not the server’s', async () => {
    const client = rawSocket(wsUrl);
    sockets.push(client.socket);
    await client.init();
    client.socket.send('x'.repeat(4 * GRAPHQL_LIMITS.maxQueryBytes + 1));
    const { code } = await client.closed;
    expect(code).toBe(1009);
    await until(
      () => logs,
      (all) => all.some((line) => /client error/.test(line.msg)),
    );
    expect(logs.filter((line) => line.level >= 50)).toEqual([]);
  });
});

describe('rate tiers on a WebSocket (findings 1 and 2)', () => {
  let limited: TestSandbox;
  let limitedUrl: string;
  const PER_MINUTE = 12;
  beforeAll(async () => {
    limited = await createTestSandbox({
      rateLimit: true,
      dataTiers: {
        public: { perMinute: PER_MINUTE, perDay: 10_000 },
        authenticated: { perMinute: 300, perDay: 100_000 },
        node: { perMinute: PER_MINUTE, perDay: null },
      },
      graphqlLimits: { connectionInitTimeoutMs: 60_000 },
    });
    const address = await limited.app.listen({ host: '127.0.0.1', port: 0 });
    limitedUrl = `${address.replace(/^http/, 'ws')}/graphql`;
  });
  afterAll(async () => {
    await limited?.close();
  });

  it('counts every ping in the socket’s tier, and closes it with 4290 past the limit', async () => {
    const node = await admin(limited.app, 'POST', '/sandbox/nodes', {
      name: 'pinging node',
      operator_address: '0x00000000000000000000000000000000000000dd',
    });
    const client = rawSocket(limitedUrl);
    await client.init({ apiKey: node.json().node_key });
    for (let i = 0; i < PER_MINUTE; i++) client.send({ type: 'ping' });
    const { code, reason } = await client.closed;
    expect(code).toBe(4290);
    expect(reason).toMatch(/Rate limited: retry in \d+ s/);
    // connection_init counted one in the node's tier: not every ping had its pong.
    expect(client.frames.filter((frame) => frame.type === 'pong').length).toBeLessThan(PER_MINUTE);
  });

  it('counts a subscription’s cost against its tier when it starts (finding 7)', async () => {
    const node = await admin(limited.app, 'POST', '/sandbox/nodes', {
      name: 'subscribing node',
      operator_address: '0x00000000000000000000000000000000000000de',
    });
    const client = rawSocket(limitedUrl);
    await client.init({ apiKey: node.json().node_key });
    const vault = limited.chain.deployment.vaults.moderate;
    const live = async () =>
      (await admin(limited.app, 'GET', '/sandbox/info')).json().graphql.subscriptions as number;
    const errorOf = (id: string) =>
      client.frames.find((frame) => frame.id === id && frame.type === 'error');
    // A vault with its strategies costs 101 (100 strategies at most): two requests each. The
    // node's 12 a minute: connection_init 1, then five such subscriptions 10, and the sixth's
    // second request is over the limit.
    for (let i = 0; i < 6; i++) {
      client.send({
        id: `heavy${i}`,
        type: 'subscribe',
        payload: {
          query: `subscription { vaultUpdated(address: "${vault}") { strategies { id } } }`,
        },
      });
      await until(
        async () => ({ count: await live(), error: errorOf(`heavy${i}`) }),
        ({ count, error }) => count === i + 1 || error !== undefined,
      );
    }
    expect(await live()).toBe(5);
    expect(errorOf('heavy5').payload[0]).toMatchObject({
      message: expect.stringMatching(/costs 101, 2 requests of your tier/),
      extensions: { code: 'RATE_LIMITED' },
    });
    client.socket.close();
    await until(live, (count) => count === 0);
  });

  it('counts every upgrade in its IP’s tier, a socket that never sends connection_init too', async () => {
    // These take the whole minute's budget, whatever the tests before used of it.
    const silent = Array.from({ length: PER_MINUTE }, () => rawSocket(limitedUrl));
    await Promise.all(silent.map((client) => client.opened));
    const stats = await limited.app.inject({ url: '/v1/protocol/stats' });
    expect(stats.statusCode).toBe(429);
    // Past it, a socket without a key of its own is closed at its connection_init.
    const late = rawSocket(limitedUrl);
    await late.opened;
    late.send({ type: 'connection_init' });
    const { code, reason } = await late.closed;
    expect(code).toBe(4290);
    expect(reason).toMatch(/Rate limited: retry in \d+ s/);
    for (const client of silent) client.socket.terminate();
  });
});

describe('vaultHistory costs what it answers (finding 6)', () => {
  it('after 20 years of chain time, 20 aliases of period ALL are refused as too costly', async () => {
    const address = sandbox.chain.deployment.vaults.moderate;
    const document = `{ ${Array.from(
      { length: 20 },
      (_, i) =>
        `h${i}: vaultHistory(address: "${address}", period: ALL, interval: DAY) { timestamp tvl }`,
    ).join(' ')} }`;
    const now = await gql(document);
    expect(now.status).toBe(200);
    for (let i = 0; i < 2; i++) {
      const advanced = await admin(sandbox.app, 'POST', '/sandbox/clock/advance', {
        seconds: 10 * 365 * 86_400,
      });
      expect(advanced.statusCode).toBe(200);
    }
    const later = await gql(document);
    expect(later.status).toBe(400);
    expect(later.body.errors[0]).toMatchObject({
      message: expect.stringMatching(/costs \d+/),
      extensions: { code: 'QUERY_TOO_COMPLEX' },
    });
    // One alias is within the cost, and answers the points it was costed at.
    const one = await gql(
      `{ vaultHistory(address: "${address}", period: ALL, interval: DAY) { timestamp } }`,
    );
    expect(one.status).toBe(200);
    expect(one.body.data.vaultHistory.length).toBeGreaterThan(7300);
  });
});
