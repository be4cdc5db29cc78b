import { EventEmitter } from 'node:events';
import { parse } from 'graphql';
import { describe, expect, it } from 'vitest';
import { GRAPHQL_LIMITS } from '../../src/api/schemas/index.ts';
import { CLOSE, createLive } from '../../src/sandbox/graphql/live.ts';

/**
 * The subscription hub alone, on stand-in sockets: a socket whose client stopped reading is
 * a fault that a real one shows only after megabytes of kernel buffers, so `bufferedAmount`
 * is set here instead (test/sandbox/graphql-hostile.test.ts has the real one).
 */
class FakeSocket extends EventEmitter {
  readonly OPEN = 1;
  readyState = 1;
  bufferedAmount = 0;
  sent: string[] = [];
  /** A message sent in fragments, until its last. */
  private partial = '';
  closedWith: number | undefined;
  send(data: string | Buffer, options: { fin?: boolean } = {}) {
    this.partial += String(data);
    if (options.fin === false) return;
    this.sent.push(this.partial);
    this.partial = '';
  }
  close(code: number) {
    this.closedWith = code;
    this.readyState = 2;
    this.emit('close');
  }
}

const limits = {
  ...GRAPHQL_LIMITS,
  maxBufferedBytes: 1000,
  maxSubscriptionsPerSocket: 3,
  connectionInitTimeoutMs: 20,
  maxLiveDocumentBytes: 12_000,
};

function live() {
  const executed: unknown[] = [];
  const hub = createLive({
    limits,
    execute: (operation, payload) => {
      executed.push([operation.variables, payload]);
      return { data: { event: payload, variables: operation.variables ?? null } };
    },
    format: (result) => result,
    log: { warn() {}, info() {} },
  });
  return { hub, executed };
}

function open(hub: ReturnType<typeof live>['hub']) {
  const socket = new FakeSocket();
  const state = hub.accept(socket as never, undefined);
  hub.send(state, '{"type":"connection_ack"}');
  return { socket, state };
}

const operation = (topic: string, variables?: Record<string, unknown>) => ({
  topic,
  source: 'subscription { x }',
  document: parse('subscription { x }'),
  variables,
  operationName: undefined,
});

/** Waits until `check` holds: the hub sends on later turns of the event loop. */
async function until(check: () => boolean) {
  while (!check()) await new Promise((resolve) => setImmediate(resolve));
}

describe('the subscription hub', () => {
  it('executes an event once per group of like subscriptions, and sends each member its frame', async () => {
    const { hub, executed } = live();
    const a = open(hub);
    const b = open(hub);
    hub.join(a.state, 'one', operation('vault:1'));
    hub.join(b.state, 'two', operation('vault:1'));
    hub.join(b.state, 'three', operation('vault:1', { v: 1 }));
    hub.join(b.state, 'other', operation('vault:2'));
    hub.publish('vault:1', 'first');
    hub.publish('vault:1', 'second');
    // A topic's events go out in order: once the last one is out at both sockets, any work
    // the first two caused (a second execution, a frame too many) has been done.
    hub.publish('vault:1', 'last');
    const gotLast = (socket: FakeSocket) =>
      socket.sent.some((frame) => JSON.parse(frame).payload?.data?.event === 'last');
    await until(
      () => gotLast(a.socket) && b.socket.sent.filter((f) => f.includes('"last"')).length === 2,
    );
    expect(executed).toEqual([
      [undefined, 'first'],
      [{ v: 1 }, 'first'],
      [undefined, 'second'],
      [{ v: 1 }, 'second'],
      [undefined, 'last'],
      [{ v: 1 }, 'last'],
    ]);
    expect(a.socket.sent.slice(1).map((frame) => JSON.parse(frame))).toEqual([
      { id: 'one', type: 'next', payload: { data: { event: 'first', variables: null } } },
      { id: 'one', type: 'next', payload: { data: { event: 'second', variables: null } } },
      { id: 'one', type: 'next', payload: { data: { event: 'last', variables: null } } },
    ]);
    expect(b.socket.sent.slice(1).map((frame) => JSON.parse(frame).id)).toEqual([
      'two',
      'three',
      'two',
      'three',
      'two',
      'three',
    ]);
  });

  it('closes a socket with 4499 when any frame would pass its unsent bound, a pong too', () => {
    const { hub } = live();
    const stalled = open(hub);
    hub.join(stalled.state, '1', operation('vault:1'));
    stalled.socket.bufferedAmount = 990;
    expect(hub.send(stalled.state, '{"type":"pong"}')).toBe(false);
    expect(stalled.socket.closedWith).toBe(CLOSE.tooSlow);
    expect(hub.stats()).toMatchObject({ sockets: 0, subscriptions: 0, dropped: 1 });
  });

  it('closes a socket not acknowledged in time with 4408, and not one that was', async () => {
    const { hub } = live();
    const silent = new FakeSocket();
    hub.accept(silent as never, undefined);
    const acknowledged = open(hub);
    await new Promise((resolve) => setTimeout(resolve, 60));
    expect(silent.closedWith).toBe(CLOSE.initTimeout);
    expect(acknowledged.socket.closedWith).toBeUndefined();
  });

  it('caps subscriptions per socket and distinct documents in bytes, and frees both', async () => {
    // 36 bytes of text whose parsed form (as held, with its locations) is about 7 KB: the
    // bound counts the parsed form, which three small documents (about 2 KB each) leave no
    // room for, and one does.
    const { hub } = live();
    const { socket, state } = open(hub);
    const subs = ['1', '2', '3'].map((id) => hub.join(state, id, operation('vault:1', { id })));
    expect(() => hub.join(state, '4', operation('vault:1'))).toThrow(/at most 3 subscriptions/);
    const other = open(hub);
    const text = `subscription { ${'a '.repeat(10)}}`;
    const big = { ...operation('vault:1'), source: text, document: parse(text) };
    expect(() => hub.join(other.state, 'big', big)).toThrow(/as many distinct subscriptions/);
    // The same document as a live one is no new group.
    hub.join(other.state, 'same', operation('vault:1', { id: '1' }));
    const waiting = subs[0]?.next();
    socket.close(1000);
    expect(await waiting).toEqual({ value: undefined, done: true });
    expect(hub.stats()).toMatchObject({ sockets: 1, subscriptions: 1 });
    hub.join(other.state, 'big', big);
  });
});
