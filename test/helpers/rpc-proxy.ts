import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A JSON-RPC proxy in front of a real node that answers as a hosted provider would: anvil's
 * and the EVM's dev methods (`anvil_*`, `evm_*`) do not exist, and eth_getLogs over more than
 * `maxLogBlocks` blocks is refused with QuickNode's error. It can also go down for a number of
 * requests, answering 503 and closing connections in turn. With `lateReceipts`, a
 * transaction's receipt is not found the first that many times it is asked for, as a node
 * answers before it has indexed the block it just mined.
 */

interface JsonRpcCall {
  jsonrpc: '2.0';
  id: number | string | null;
  method: string;
  params?: unknown[];
}

interface JsonRpcAnswer {
  jsonrpc: '2.0';
  id: number | string | null;
  result?: unknown;
  error?: { code: number; message: string };
}

/** One eth_getLogs call the proxy saw: its range, and whether the node answered it. */
export interface LogsCall {
  from: number;
  to: number;
  served: boolean;
}

export interface RpcProxy {
  url: string;
  /** Every eth_getLogs call, in the order they came. */
  logsCalls: LogsCall[];
  /**
   * The next `requests` requests fail (503, then a closed connection, in turn), starting with
   * the next eth_getLogs call sent on its own over a range the provider takes: the moment a
   * reader that split a refused range is most exposed. Resolves once the outage is over.
   */
  outage(requests: number): Promise<void>;
  /**
   * Answers `block` as the chain's head (eth_blockNumber, eth_getBlockByNumber("latest")) until
   * released, so that blocks mined meanwhile appear to the sandbox all at once.
   */
  holdHead(block: number): () => void;
  close(): Promise<void>;
}

const HIDDEN = /^(anvil|evm)_/;

function span(call: JsonRpcCall): { from: number; to: number } | undefined {
  const filter = call.params?.[0] as { fromBlock?: string; toBlock?: string } | undefined;
  const from = filter?.fromBlock;
  const to = filter?.toBlock;
  if (!from?.startsWith('0x') || !to?.startsWith('0x')) return undefined;
  return { from: Number.parseInt(from, 16), to: Number.parseInt(to, 16) };
}

export async function startRpcProxy(
  target: string,
  options: { maxLogBlocks: number; lateReceipts?: number },
): Promise<RpcProxy> {
  const logsCalls: LogsCall[] = [];
  /** How many times each transaction's receipt was asked for, by hash. */
  const receiptAsks = new Map<string, number>();
  let outage: { armed: boolean; remaining: number; failed: number; over: () => void } | undefined;
  let heldHead: number | undefined;

  /** The call as the node gets it: the head asked for is the held one, while one is held. */
  function rewritten(call: JsonRpcCall): JsonRpcCall {
    if (heldHead === undefined) return call;
    const held = `0x${heldHead.toString(16)}`;
    if (call.method === 'eth_blockNumber') {
      return { ...call, method: 'eth_getBlockByNumber', params: [held, false] };
    }
    if (call.method === 'eth_getBlockByNumber' && call.params?.[0] === 'latest') {
      return { ...call, params: [held, ...call.params.slice(1)] };
    }
    return call;
  }

  /** The answer to one call the proxy answers itself, or undefined to pass it on. */
  function refusal(call: JsonRpcCall): JsonRpcAnswer | undefined {
    if (HIDDEN.test(call.method)) {
      return {
        jsonrpc: '2.0',
        id: call.id,
        error: {
          code: -32601,
          message: `the method ${call.method} does not exist/is not available`,
        },
      };
    }
    if (call.method === 'eth_getTransactionReceipt' && options.lateReceipts) {
      const hash = String(call.params?.[0]).toLowerCase();
      const asked = (receiptAsks.get(hash) ?? 0) + 1;
      receiptAsks.set(hash, asked);
      if (asked <= options.lateReceipts) return { jsonrpc: '2.0', id: call.id, result: null };
      return undefined;
    }
    if (call.method !== 'eth_getLogs') return undefined;
    const range = span(call);
    if (range && range.to - range.from + 1 > options.maxLogBlocks) {
      logsCalls.push({ ...range, served: false });
      return {
        jsonrpc: '2.0',
        id: call.id,
        error: {
          code: -32602,
          message: `eth_getLogs is limited to a ${options.maxLogBlocks} range`,
        },
      };
    }
    return undefined;
  }

  async function forward(calls: JsonRpcCall[], batch: boolean): Promise<JsonRpcAnswer[]> {
    if (calls.length === 0) return [];
    const response = await fetch(target, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(batch ? calls : calls[0]),
    });
    const body = (await response.json()) as JsonRpcAnswer | JsonRpcAnswer[];
    const answers = Array.isArray(body) ? body : [body];
    for (const call of calls) {
      const range = call.method === 'eth_getLogs' ? span(call) : undefined;
      const answer = answers.find((a) => a.id === call.id);
      if (range) logsCalls.push({ ...range, served: !answer?.error });
    }
    return answers;
  }

  /** The request's place in the outage (1, 2, …) when it starts it or falls in it, else 0. */
  function failureNumber(body: JsonRpcCall | JsonRpcCall[]): number {
    if (!outage) return 0;
    if (outage.armed) {
      const single = !Array.isArray(body) && body.method === 'eth_getLogs';
      const range = single ? span(body) : undefined;
      if (!range || range.to - range.from + 1 > options.maxLogBlocks) return 0;
      outage.armed = false;
    }
    const number = ++outage.failed;
    if (--outage.remaining === 0) {
      const { over } = outage;
      outage = undefined;
      over();
    }
    return number;
  }

  async function handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of request) chunks.push(chunk as Buffer);
    const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as JsonRpcCall | JsonRpcCall[];
    const failure = failureNumber(body);
    if (failure > 0) {
      if (failure % 2 === 1) {
        response.writeHead(503, { 'content-type': 'text/plain' }).end('Service Unavailable');
      } else {
        request.socket.destroy();
      }
      return;
    }
    const calls = Array.isArray(body) ? body : [body];
    const own = new Map<JsonRpcCall, JsonRpcAnswer>();
    for (const call of calls) {
      const answer = refusal(call);
      if (answer) own.set(call, answer);
    }
    const passed = calls.filter((call) => !own.has(call));
    const numberAsked = new Set(
      passed.filter((call) => call.method === 'eth_blockNumber').map((call) => call.id),
    );
    const answers = (await forward(passed.map(rewritten), Array.isArray(body))).map((answer) =>
      // eth_blockNumber went as the held block: its number is the answer.
      numberAsked.has(answer.id) && answer.result
        ? { ...answer, result: (answer.result as { number: string }).number }
        : answer,
    );
    const ordered = calls.map(
      (call) =>
        own.get(call) ??
        answers.find((answer) => answer.id === call.id) ?? {
          jsonrpc: '2.0' as const,
          id: call.id,
          error: { code: -32603, message: 'no answer from the node' },
        },
    );
    response
      .writeHead(200, { 'content-type': 'application/json' })
      .end(JSON.stringify(Array.isArray(body) ? ordered : ordered[0]));
  }

  const server = createServer((request, response) => {
    handle(request, response).catch((error: unknown) => {
      if (!response.headersSent) {
        response.writeHead(502, { 'content-type': 'text/plain' }).end(String(error));
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    logsCalls,
    holdHead(block) {
      heldHead = block;
      return () => {
        heldHead = undefined;
      };
    },
    outage(requests) {
      return new Promise((over) => {
        outage = { armed: true, remaining: requests, failed: 0, over };
      });
    },
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
