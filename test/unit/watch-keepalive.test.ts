import { mkdtempSync, rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { type WebSocket, WebSocketServer } from 'ws';
import { CLOSE_SANDBOX_RESTORED } from '../../src/api/schemas/sandbox.ts';
import { follow } from '../../src/cli/watch.ts';
import { capturedContext } from '../helpers/run-context.ts';
import { until } from '../helpers/serve.ts';

/**
 * follow()'s keep-alive and reconnection against a graphql-transport-ws server of our own,
 * which can stop answering pings while its socket stays open (a half-open connection: a
 * sleeping laptop, a NAT that forgot the flow), or drop the socket without a close frame.
 * The timings are shortened; the server is real, on 127.0.0.1.
 */
interface Connection {
  socket: WebSocket;
  /** The types of the messages it received, in order. */
  received: string[];
  /** The subscription's id, once the client subscribed. */
  subscriptionId?: string;
  closed?: { code: number; reason: string };
}

let running: WebSocketServer | undefined;
let dir = '';
afterEach(async () => {
  const server = running;
  running = undefined;
  if (server) {
    for (const client of server.clients) client.terminate();
    await new Promise((resolve) => server.close(resolve));
  }
  rmSync(dir, { recursive: true, force: true });
});

/** A graphql-transport-ws server; `answersPings(n)` says whether connection n pongs. */
async function startServer(answersPings: (connection: number) => boolean) {
  const connections: Connection[] = [];
  const server = new WebSocketServer({ host: '127.0.0.1', port: 0, path: '/graphql' });
  running = server;
  await new Promise((resolve) => server.once('listening', resolve));
  const hooks: { onConnection?: (n: number, socket: WebSocket) => void } = {};
  server.on('connection', (socket) => {
    const connection: Connection = { socket, received: [] };
    const number = connections.push(connection) - 1;
    hooks.onConnection?.(number, socket);
    socket.on('message', (data) => {
      const message = JSON.parse(String(data)) as { type: string; id?: string };
      connection.received.push(message.type);
      if (message.type === 'connection_init') socket.send('{"type":"connection_ack"}');
      if (message.type === 'ping' && answersPings(number)) socket.send('{"type":"pong"}');
      if (message.type === 'subscribe') connection.subscriptionId = message.id as string;
    });
    socket.on('close', (code, reason) => {
      connection.closed = { code, reason: String(reason) };
    });
  });
  const port = (server.address() as AddressInfo).port;
  /** Sends an event on connection n's subscription. */
  const publish = (n: number, data: unknown) => {
    const connection = connections[n] as Connection;
    connection.socket.send(
      JSON.stringify({ type: 'next', id: connection.subscriptionId, payload: { data } }),
    );
  };
  return {
    url: `http://127.0.0.1:${port}`,
    connections,
    publish,
    /** Called with each new connection's number and socket (to drop it, say). */
    set onConnection(hook: (n: number, socket: WebSocket) => void) {
      hooks.onConnection = hook;
    },
  };
}

/** follow() for one event, with its output captured. */
function watchOne(dataUrl: string) {
  dir = mkdtempSync(join(tmpdir(), 'agentctl-keepalive-'));
  const { context, text } = capturedContext({ dataUrl }, { AGENTCTL_CONFIG_DIR: dir });
  const events: unknown[] = [];
  const done = follow(
    context,
    { query: 'subscription { ping }', variables: {}, count: 1, awaiting: 'an event' },
    (data) => events.push(data),
    { pingEveryMs: 100, pongTimeoutMs: 200 },
  ).finally(() => context.close());
  return { done, events, text };
}

describe('agentctl watch’s keep-alive', () => {
  it('pings, and on a connection that answers no pong closes it, reconnects, and follows again', async () => {
    // The first connection stays open but never pongs; the next ones do.
    const fake = await startServer((connection) => connection > 0);
    const watch = watchOne(fake.url);
    await until(() => fake.connections.length === 2, 10_000);
    const [silent, second] = fake.connections as [Connection, Connection];
    expect(silent.received.slice(0, 3)).toEqual(['connection_init', 'subscribe', 'ping']);
    // It was the client that gave up on it, saying why.
    await until(() => silent.closed !== undefined);
    expect(silent.closed).toEqual({ code: 4408, reason: 'no pong from the server' });
    await until(() => second.subscriptionId !== undefined);
    fake.publish(1, { ping: 'after the reconnection' });
    await watch.done;
    expect(watch.events).toEqual([{ ping: 'after the reconnection' }]);
    expect(watch.text.stderr).toMatch(
      /connection to ws:\/\/127\.0\.0\.1:\d+\/graphql lost; reconnecting in/,
    );
    expect(watch.text.stderr).toMatch(
      /reconnected to ws:\/\/127\.0\.0\.1:\d+\/graphql; events while it was down are not replayed/,
    );
  });

  it('keeps a connection that answers its pings', async () => {
    const fake = await startServer(() => true);
    const watch = watchOne(fake.url);
    await until(() => fake.connections[0]?.subscriptionId !== undefined);
    const [only] = fake.connections as [Connection];
    // Several pings, each answered within the timeout: the connection stays.
    await until(() => only.received.filter((type) => type === 'ping').length >= 4, 10_000);
    fake.publish(0, { ping: 'on the first connection' });
    await watch.done;
    expect(watch.events).toEqual([{ ping: 'on the first connection' }]);
    expect(fake.connections).toHaveLength(1);
    expect(watch.text.stderr).not.toMatch(/lost|reconnect/);
  });

  it('reconnects when the server drops the socket without a close frame', async () => {
    const fake = await startServer(() => true);
    const watch = watchOne(fake.url);
    await until(() => fake.connections[0]?.subscriptionId !== undefined);
    fake.connections[0]?.socket.terminate();
    await until(() => fake.connections[1]?.subscriptionId !== undefined, 10_000);
    fake.publish(1, { ping: 'after the drop' });
    await watch.done;
    expect(watch.events).toEqual([{ ping: 'after the drop' }]);
    expect(watch.text.stderr).toMatch(/lost; reconnecting in/);
  });
});

describe('agentctl watch when the sandbox is restored', () => {
  /** follow() for one event, printing it as the commands do (--json: one object a line). */
  async function watchPrinting(dataUrl: string, json: boolean) {
    dir = mkdtempSync(join(tmpdir(), 'agentctl-restored-'));
    const { context, text } = capturedContext({ dataUrl, json }, { AGENTCTL_CONFIG_DIR: dir });
    const out = await context.output();
    const done = follow(
      context,
      { query: 'subscription { ping }', variables: {}, count: 1, awaiting: 'an event' },
      (data) => out.print(JSON.stringify(data)),
      { pingEveryMs: 60_000, pongTimeoutMs: 60_000 },
    ).finally(() => context.close());
    return { done, text };
  }

  it('says so, and subscribes again at once, without a backoff wait', async () => {
    const fake = await startServer(() => true);
    const watch = await watchPrinting(fake.url, false);
    await until(() => fake.connections[0]?.subscriptionId !== undefined);
    fake.connections[0]?.socket.close(CLOSE_SANDBOX_RESTORED, 'Sandbox restored');
    await until(() => fake.connections[1]?.subscriptionId !== undefined, 10_000);
    fake.publish(1, { ping: 'on the restored sandbox' });
    await watch.done;
    expect(watch.text.stdout).toBe('{"ping":"on the restored sandbox"}\n');
    expect(watch.text.stderr).toContain(
      'agentctl: the sandbox was restored to a snapshot: what was shown before may no longer hold; subscribing again',
    );
    expect(watch.text.stderr).toMatch(/subscribed again to ws:\/\/127\.0\.0\.1:\d+\/graphql/);
    // Not the lost-connection path, with its wait.
    expect(watch.text.stderr).not.toMatch(/lost|reconnecting in/);
  });

  it('--json: a sandbox_restored line between the events on stdout', async () => {
    const fake = await startServer(() => true);
    const watch = await watchPrinting(fake.url, true);
    await until(() => fake.connections[0]?.subscriptionId !== undefined);
    fake.connections[0]?.socket.close(CLOSE_SANDBOX_RESTORED, 'Sandbox restored');
    await until(() => fake.connections[1]?.subscriptionId !== undefined, 10_000);
    fake.publish(1, { ping: 'after' });
    await watch.done;
    expect(
      watch.text.stdout
        .trimEnd()
        .split('\n')
        .map((line) => JSON.parse(line)),
    ).toEqual([{ event: 'sandbox_restored' }, { ping: 'after' }]);
    expect(watch.text.stderr).toContain('the sandbox was restored');
  });

  it('backs off as usual when that immediate try fails: never a tight loop', async () => {
    const fake = await startServer(() => true);
    // The connection right after the restore is dropped at once; the next one works.
    fake.onConnection = (n, socket) => {
      if (n === 1) socket.terminate();
    };
    const watch = await watchPrinting(fake.url, false);
    await until(() => fake.connections[0]?.subscriptionId !== undefined);
    fake.connections[0]?.socket.close(CLOSE_SANDBOX_RESTORED, 'Sandbox restored');
    await until(() => fake.connections[2]?.subscriptionId !== undefined, 10_000);
    fake.publish(2, { ping: 'at last' });
    await watch.done;
    expect(fake.connections).toHaveLength(3);
    expect(watch.text.stderr).toMatch(/lost; reconnecting in \d+\.\d s/);
    expect(watch.text.stderr).toMatch(/subscribed again to/);
  });
});
