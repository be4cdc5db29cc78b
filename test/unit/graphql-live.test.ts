import { EventEmitter } from 'node:events';
import { describe, expect, it } from 'vitest';
import { GRAPHQL_LIMITS } from '../../src/api/schemas/index.ts';
import { CLOSE, createLive } from '../../src/sandbox/graphql/live.ts';

/**
 * The subscription hub alone, on stand-in sockets: a socket whose client stopped reading is
 * a fault that a real one shows only after megabytes of kernel buffers, so `bufferedAmount`
 * is set here instead.
 */
class FakeSocket extends EventEmitter {
  bufferedAmount = 0;
  sent: unknown[] = [];
  closedWith: number | undefined;
  send(data: unknown) {
    this.sent.push(data);
  }
  terminated = false;
  close(code: number) {
    this.closedWith = code;
    this.emit('close');
  }
  terminate() {
    this.terminated = true;
    this.emit('close');
  }
}

const limits = {
  ...GRAPHQL_LIMITS,
  maxQueuedEvents: 3,
  maxBufferedBytes: 1000,
  maxSubscriptionsPerSocket: 3,
};
const warnings: string[] = [];
const live = () =>
  createLive({
    limits,
    callerOf: (key) => {
      if (key !== undefined && key !== 'good') throw new Error('not a key');
      return { tier: 'public', id: 'x' };
    },
    log: { warn: (message) => warnings.push(message) },
  });

function open(hub: ReturnType<typeof live>) {
  const socket = new FakeSocket();
  hub.accept(socket as never);
  socket.emit('message', Buffer.from(JSON.stringify({ type: 'connection_init' })), false);
  return {
    socket,
    state: hub.stateOf(socket as never) as NonNullable<ReturnType<typeof hub.stateOf>>,
  };
}

describe('the subscription hub', () => {
  it('delivers in order to every subscriber of a topic, and to no other', async () => {
    const hub = live();
    const a = open(hub);
    const b = open(hub);
    const one = hub.subscribe(a.state, 'vault:1');
    const two = hub.subscribe(b.state, 'vault:1');
    const other = hub.subscribe(b.state, 'vault:2');
    hub.publish('vault:1', 'first');
    hub.publish('vault:1', 'second');
    expect(await one.next()).toEqual({ value: 'first', done: false });
    expect(await one.next()).toEqual({ value: 'second', done: false });
    expect(await two.next()).toEqual({ value: 'first', done: false });
    let got = false;
    other.next().then(() => {
      got = true;
    });
    await new Promise((resolve) => setImmediate(resolve));
    expect(got).toBe(false);
  });

  it('drops a subscriber that falls behind, without holding up the others', async () => {
    const hub = live();
    const slow = open(hub);
    const fast = open(hub);
    hub.subscribe(slow.state, 'transactions:*'); // never read
    const reader = hub.subscribe(fast.state, 'transactions:*');
    for (let i = 0; i < 5; i++) {
      hub.publish('transactions:*', i);
      expect(await reader.next()).toEqual({ value: i, done: false });
    }
    expect(slow.socket.terminated).toBe(true);
    expect(fast.socket.terminated).toBe(false);
    expect(hub.stats()).toMatchObject({ sockets: 1, subscriptions: 1, dropped: 1 });
    expect(warnings.at(-1)).toMatch(/fell 3 events behind/);
  });

  it('drops a socket whose unsent bytes pass the bound', () => {
    const hub = live();
    const stalled = open(hub);
    hub.subscribe(stalled.state, 'vault:1');
    stalled.socket.bufferedAmount = 5000;
    hub.publish('vault:1', 'x');
    expect(stalled.socket.terminated).toBe(true);
    expect(hub.stats().subscriptions).toBe(0);
  });

  it('ends a socket’s subscriptions when it closes, and caps them per socket', async () => {
    const hub = live();
    const { socket, state } = open(hub);
    const subs = [1, 2, 3].map(() => hub.subscribe(state, 'vault:1'));
    expect(() => hub.subscribe(state, 'vault:1')).toThrow(/at most 3 subscriptions/);
    expect(hub.stats().subscriptions).toBe(3);
    const waiting = subs[0]?.next();
    socket.close(1000);
    expect(await waiting).toEqual({ value: undefined, done: true });
    expect(hub.stats()).toMatchObject({ sockets: 0, subscriptions: 0 });
  });

  it('sends every error frame in the standard shape, and any other frame as it was', () => {
    const hub = live();
    const socket = new FakeSocket();
    hub.accept(socket as never);
    const next = '{"type":"next","id":"1","payload":{"data":{"x":1}}}';
    (socket as unknown as { send(data: string): void }).send(next);
    (socket as unknown as { send(data: string): void }).send(
      '{"type":"error","id":"2","payload":[{"message":"Syntax Error: Expected Name, found <EOF>.","locations":[{"line":1,"column":9}]},{"message":"Cannot read properties of null"}]}',
    );
    expect(socket.sent[0]).toBe(next);
    expect(JSON.parse(socket.sent[1] as string)).toEqual({
      type: 'error',
      id: '2',
      payload: [
        {
          message: 'Syntax Error: Expected Name, found <EOF>.',
          locations: [{ line: 1, column: 9 }],
          path: [],
          extensions: { code: 'GRAPHQL_PARSE_FAILED' },
        },
        {
          message: 'Cannot read properties of null',
          locations: [],
          path: [],
          extensions: { code: 'BAD_USER_INPUT' },
        },
      ],
    });
  });

  it('closes a socket that sends connection_init twice (4429) or a bad key (4403)', () => {
    const hub = live();
    const twice = open(hub);
    twice.socket.emit('message', Buffer.from(JSON.stringify({ type: 'connection_init' })), false);
    expect(twice.socket.closedWith).toBe(CLOSE.tooManyInits);
    const forged = new FakeSocket();
    hub.accept(forged as never);
    forged.emit(
      'message',
      Buffer.from(JSON.stringify({ type: 'connection_init', payload: { apiKey: 'bad' } })),
      false,
    );
    expect(forged.closedWith).toBe(CLOSE.unauthorised);
  });
});
