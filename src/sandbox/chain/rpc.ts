import type { Hash, Hex } from 'viem';
import { nodeFetch } from './http.ts';

/**
 * A small JSON-RPC client for the sandbox's own calls to anvil: block production, replay and
 * checkpoints. It batches (one HTTP request for many calls) and reports each call's own error.
 * Reads for the routes go through viem instead; both share one bounded keep-alive pool (http.ts).
 */

/** A JSON-RPC error answered by the node (as opposed to the node being unreachable). */
export class RpcError extends Error {
  readonly method: string;
  readonly code: number;
  readonly data: unknown;

  constructor(method: string, code: number, message: string, data?: unknown) {
    super(`${method}: ${message}`);
    this.name = 'RpcError';
    this.method = method;
    this.code = code;
    this.data = data;
  }
}

/** The node did not answer at all (refused, reset, timed out). */
export class RpcUnreachableError extends Error {
  constructor(url: string, cause: unknown) {
    super(`cannot reach ${url}: ${(cause as Error)?.message ?? String(cause)}`, { cause });
    this.name = 'RpcUnreachableError';
  }
}

export interface RpcCall {
  method: string;
  params?: unknown[];
}

export type RpcResult = { ok: true; value: unknown } | { ok: false; error: RpcError };

interface RpcResponse {
  id: number;
  result?: unknown;
  error?: { code: number; message: string; data?: unknown };
}

export interface RpcClient {
  readonly url: string;
  call<T = unknown>(method: string, params?: unknown[]): Promise<T>;
  /** Sends every call in one HTTP request; each result says whether its own call failed. */
  batch(calls: RpcCall[]): Promise<RpcResult[]>;
}

const TIMEOUT_MS = 60_000;

export function createRpcClient(
  url: string,
  fetchFn: typeof fetch = nodeFetch,
  /** How long one request may take before the node counts as unreachable. */
  timeoutMs = TIMEOUT_MS,
): RpcClient {
  let nextId = 1;
  async function post(body: unknown): Promise<unknown> {
    let response: Response;
    try {
      response = await fetchFn(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
        signal: AbortSignal.timeout(timeoutMs),
      });
    } catch (error) {
      throw new RpcUnreachableError(url, error);
    }
    try {
      return await response.json();
    } catch (error) {
      throw new RpcUnreachableError(url, error);
    }
  }
  const toResult = (call: RpcCall, response: RpcResponse | undefined): RpcResult =>
    response?.error || !response
      ? {
          ok: false,
          error: new RpcError(
            call.method,
            response?.error?.code ?? -1,
            response?.error?.message ?? 'no answer',
            response?.error?.data,
          ),
        }
      : { ok: true, value: response.result };

  return {
    url,
    async call<T>(method: string, params: unknown[] = []) {
      const id = nextId++;
      const result = toResult(
        { method, params },
        (await post({ jsonrpc: '2.0', id, method, params })) as RpcResponse,
      );
      if (!result.ok) throw result.error;
      return result.value as T;
    },
    async batch(calls) {
      if (calls.length === 0) return [];
      const first = nextId;
      nextId += calls.length;
      const answers = (await post(
        calls.map((call, i) => ({
          jsonrpc: '2.0',
          id: first + i,
          method: call.method,
          params: call.params ?? [],
        })),
      )) as RpcResponse[];
      const byId = new Map((Array.isArray(answers) ? answers : []).map((a) => [a.id, a]));
      return calls.map((call, i) => toResult(call, byId.get(first + i)));
    },
  };
}

/** A block as eth_getBlockByNumber(n, false) answers it: the fields the sandbox reads. */
export interface RpcBlock {
  number: Hex;
  hash: Hash;
  parentHash: Hash;
  timestamp: Hex;
  transactions: Hash[];
}

/** A block number as JSON-RPC writes it. */
export function toQuantity(n: number | bigint): Hex {
  return `0x${n.toString(16)}`;
}
