import { createServer as createHttpServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createServer as createNetServer, type Server, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { createApiClient } from '../../src/api/client.ts';
import { OutcomeUnknownError, UnreachableError } from '../../src/api/errors.ts';

const servers: Server[] = [];
afterEach(() => {
  for (const server of servers.splice(0)) server.close();
});

async function listen(server: Server): Promise<string> {
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

const clientOf = (
  baseUrl: string,
  timeouts: { timeoutMs?: number; writeTimeoutMs?: number; retryBudgetMs?: number },
) => createApiClient({ baseUrl, userAgent: 'test', apiKey: async () => 'agk_test', ...timeouts });

describe('the HTTP client on node:http', () => {
  it('gives a write its whole write timeout, not the per-try timeout of a read', async () => {
    const url = await listen(
      createHttpServer((_request, response) => {
        setTimeout(() => response.end('{"ok":true}'), 400);
      }),
    );
    const client = clientOf(url, { timeoutMs: 100, writeTimeoutMs: 5_000 });
    try {
      const answer = await client.raw('POST', '/api/v1/agent/vault/deposit', {});
      expect(answer.text).toBe('{"ok":true}');
      // A read is bounded by the per-try timeout (and its retry budget).
      const read = clientOf(url, { timeoutMs: 100, writeTimeoutMs: 5_000, retryBudgetMs: 150 });
      await expect(read.raw('GET', '/health')).rejects.toThrow(/timed out waiting for an answer/);
      await read.close();
    } finally {
      await client.close();
    }
  });

  it('says a write that timed out may still have taken effect, and never sends it again', async () => {
    // Accepts every request and never answers: a write the service may be carrying out.
    const received: string[] = [];
    const url = await listen(
      createHttpServer((request) => {
        received.push(`${request.method} ${request.url}`);
      }),
    );
    const client = clientOf(url, { timeoutMs: 100, writeTimeoutMs: 300, retryBudgetMs: 150 });
    try {
      const write = client.raw('POST', '/api/v1/agent/vault/deposit', { amount_usdc: 1 });
      await expect(write).rejects.toThrow(UnreachableError);
      await expect(write).rejects.toThrow(
        `cannot reach ${url}: timed out waiting for an answer; the POST may still have taken effect: check before retrying`,
      );
      expect(received).toEqual(['POST /api/v1/agent/vault/deposit']);
      // A read that times out was not a change: it says nothing of the kind.
      const read = (await client.raw('GET', '/health').catch((error) => error)) as Error;
      expect(read).toBeInstanceOf(UnreachableError);
      expect(read.message).toBe(`cannot reach ${url}: timed out waiting for an answer`);
    } finally {
      await client.close();
    }
  });

  it('sends a read again, once, when a kept-alive connection was reset before any answer', async () => {
    // Answers the first request on each connection, and resets at the second: what a server
    // does when it closes an idle connection just as the client reuses it.
    const requests: number[] = [];
    const url = await listen(
      createNetServer((socket: Socket) => {
        let served = 0;
        socket.on('data', () => {
          served += 1;
          requests.push(served);
          if (served > 1) return socket.resetAndDestroy();
          socket.write('HTTP/1.1 200 OK\r\ncontent-length: 2\r\nkeep-alive: timeout=5\r\n\r\n{}');
        });
      }),
    );
    const client = clientOf(url, {});
    try {
      expect((await client.raw('GET', '/one')).text).toBe('{}');
      expect((await client.raw('GET', '/two')).text).toBe('{}');
      expect(requests).toEqual([1, 2, 1]);
    } finally {
      await client.close();
    }
  });

  it('never sends a write again after a reset, where keys are not known to be honoured: the service may have read it', async () => {
    // Answers GETs, and resets a connection as soon as it has read a write: a service that
    // died (or a proxy that cut the answer) after the write reached it.
    const writes: string[] = [];
    const url = await listen(
      createNetServer((socket: Socket) => {
        socket.on('data', (chunk) => {
          const line = chunk.toString().split('\r\n')[0] as string;
          if (line.startsWith('GET')) {
            socket.write('HTTP/1.1 200 OK\r\ncontent-length: 2\r\nkeep-alive: timeout=5\r\n\r\n{}');
            return;
          }
          writes.push(line);
          socket.resetAndDestroy();
        });
      }),
    );
    const client = clientOf(url, {});
    try {
      // A kept-alive connection first, which a write must not be resent over.
      expect((await client.raw('GET', '/one')).text).toBe('{}');
      await expect(client.raw('POST', '/api/v1/agent/vault/deposit', {})).rejects.toThrow(
        UnreachableError,
      );
      expect(writes).toHaveLength(1);
      expect((await client.raw('GET', '/two')).text).toBe('{}');
      await expect(client.deposit({ vault_id: 'moderate', amount_usdc: 1 })).rejects.toThrow(
        OutcomeUnknownError,
      );
      expect(writes).toEqual([
        'POST /api/v1/agent/vault/deposit HTTP/1.1',
        'POST /api/v1/agent/vault/deposit HTTP/1.1',
      ]);
    } finally {
      await client.close();
    }
  });

  it('drops a byte-order mark before parsing JSON', async () => {
    const url = await listen(
      createHttpServer((_request, response) => {
        response.setHeader('content-type', 'application/json');
        response.end(
          '\uFEFF{"status":"ok","version":"1","chain_id":84532,"chain_name":"x","rpc_connected":true}',
        );
      }),
    );
    const client = clientOf(url, {});
    try {
      expect((await client.health()).data.status).toBe('ok');
    } finally {
      await client.close();
    }
  });
});
