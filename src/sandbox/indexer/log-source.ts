import { RpcError, RpcUnreachableError } from '../chain/rpc.ts';

/**
 * eth_getLogs over block ranges a provider accepts. Providers cap a call's range or its
 * results, each with its own wording; the source tells those refusals apart from a node that
 * is down or busy. A refused range shrinks (to the size the provider names, or by half); a
 * transient failure is tried again after a pause at the same size; and the size grows back
 * after a run of successes, so that neither an outage nor one dense stretch of blocks leaves
 * every later call reading a block at a time.
 */

/** Why an eth_getLogs call failed, as far as the range is concerned. */
export type LogsFailure =
  /** The provider refused the range; `blocks` is the most to ask for next. */
  | { kind: 'range'; blocks: number }
  /** Anything else: the node is down, busy or rate limiting. The same range is tried again. */
  | { kind: 'transient' };

/** Provider wordings that name the largest range they take, in blocks. */
const NAMED_LIMITS: Array<{ pattern: RegExp; blocks: (match: RegExpMatchArray) => number }> = [
  // Alchemy: "… Based on your parameters, this block range should work: [0x1, 0x7d0]".
  // Infura, zkSync: "… Try with this block range [0x1, 0x7d0]."
  {
    pattern:
      /(?:this block range should work|try with this block range):?\s*\[(0x[0-9a-f]+),\s*(0x[0-9a-f]+)\]/i,
    blocks: (m) => Number.parseInt(m[2] as string, 16) - Number.parseInt(m[1] as string, 16) + 1,
  },
  // QuickNode, 1RPC, Blast: "eth_getLogs is limited to a 10,000 range"; BlockPI: "… limited to
  // 1024 block range".
  { pattern: /limited to (?:a )?([\d,]+)/i, blocks: (m) => count(m[1]) },
  // Erigon, PublicNode and others: "exceed maximum block range: 5000", "maximum block range: 50000".
  { pattern: /max(?:imum)? block range:? ?([\d,]+)/i, blocks: (m) => count(m[1]) },
  // Cloudflare: "Max range: 800".
  { pattern: /max range: ?([\d,]+)/i, blocks: (m) => count(m[1]) },
  // Avalanche: "requested too many blocks from 1 to 9000, maximum is set to 2048".
  { pattern: /maximum is set to ([\d,]+)/i, blocks: (m) => count(m[1]) },
  // Coinbase: "please limit the query to at most 1000 blocks".
  { pattern: /at most ([\d,]+) blocks/i, blocks: (m) => count(m[1]) },
  // thirdweb: "Maximum allowed number of requested blocks is 1000".
  { pattern: /requested blocks is ([\d,]+)/i, blocks: (m) => count(m[1]) },
  // Aurora, and Alchemy's own hint: "up to a 2,000 block range".
  { pattern: /up to a ([\d,]+) block range/i, blocks: (m) => count(m[1]) },
  // Moonbeam: "block range is too wide (maximum 1024)"; Blast: "(5000 > 1000)".
  { pattern: /\(maximum ([\d,]+)\)|\(\d+ > ([\d,]+)\)/i, blocks: (m) => count(m[1] ?? m[2]) },
];

/** Wordings of a refused range or result set that name no size: ask for half. */
const UNSIZED_REFUSALS = [
  // geth, Infura (-32005), Polygon zkEVM: "query returned more than 10000 results".
  /returned more than [\d,]+ results/i,
  // Optimism, Base, Ankr, others: "block range is too large", "block range too large",
  // "block range is too wide", "range is too large".
  /(?:block )?range (?:is )?too (?:large|wide|big)/i,
  // "exceed maximum block range", "exceeds the range allowed for your plan".
  /exceeds? (?:the )?(?:max(?:imum)? )?(?:block )?range/i,
  // Chainstack: "Block range limit exceeded."
  /block range limit exceeded/i,
  // LlamaRPC, Ankr: "query exceeds max results"; Arbitrum: "logs matched by query exceeds
  // limit of 10000"; Alchemy: "Log response size exceeded"; Optimism: "backend response too
  // large"; 1RPC: "response size should not greater than …".
  /exceeds max results|matched by query exceeds|response size|response too large/i,
];

function count(digits: string | undefined): number {
  return Number((digits ?? '').replace(/,/g, ''));
}

/**
 * Classifies an eth_getLogs failure over a range of `requested` blocks. Only a node's error
 * answer can refuse a range, and only in words that say so: an unreachable node, an HTTP error,
 * a rate limit (Infura's -32005 "daily request count exceeded, request rate limited", HTTP 429)
 * or any error not recognised is transient, and never shrinks the range.
 */
export function classifyLogsError(error: unknown, requested: number): LogsFailure {
  if (error instanceof RpcUnreachableError || !(error instanceof RpcError)) {
    return { kind: 'transient' };
  }
  const text = `${error.message} ${typeof error.data === 'string' ? error.data : JSON.stringify(error.data ?? '')}`;
  const half = Math.max(1, Math.floor(requested / 2));
  for (const { pattern, blocks } of NAMED_LIMITS) {
    const match = text.match(pattern);
    if (!match) continue;
    const named = blocks(match);
    // A size not below the one refused (a cap on results rather than blocks) says nothing new.
    if (Number.isInteger(named) && named >= 1 && named < requested) {
      return { kind: 'range', blocks: named };
    }
    return { kind: 'range', blocks: half };
  }
  if (UNSIZED_REFUSALS.some((pattern) => pattern.test(text))) {
    return { kind: 'range', blocks: half };
  }
  return { kind: 'transient' };
}

export interface LogSourceOptions<T> {
  /** One eth_getLogs call over [from, to]. */
  fetch(from: number, to: number): Promise<T[]>;
  /** The most blocks one call asks for: where the size starts, and the most it grows back to. */
  maxBlocks: number;
  /** After this many successful calls in a row, the size doubles (up to maxBlocks). */
  growAfter?: number;
  /** How many times a transient failure is tried again before it is thrown. */
  retries?: number;
  /** The pause before the first retry; it doubles with each further one. */
  retryPauseMs?: number;
  /** True once the indexer is closing: no further retries. */
  stopped?: () => boolean;
}

export const LOGS_GROW_AFTER = 8;
export const LOGS_RETRIES = 3;
export const LOGS_RETRY_PAUSE_MS = 100;

/**
 * Reads logs over any range in calls of the size the provider takes (see the module comment).
 * `succeeded` and `failed` tell it of calls made elsewhere (the indexer batches a step's first
 * call with its block headers).
 */
export function createLogSource<T>(options: LogSourceOptions<T>) {
  const growAfter = options.growAfter ?? LOGS_GROW_AFTER;
  const retries = options.retries ?? LOGS_RETRIES;
  const pauseMs = options.retryPauseMs ?? LOGS_RETRY_PAUSE_MS;
  let size = options.maxBlocks;
  let streak = 0;

  function succeeded(): void {
    if (++streak < growAfter) return;
    streak = 0;
    size = Math.min(options.maxBlocks, size * 2);
  }

  /** Takes in a failed call over `blocks` blocks; answers whether the range was refused. */
  function failed(error: unknown, blocks: number): LogsFailure {
    const failure = classifyLogsError(error, blocks);
    if (failure.kind === 'range') {
      streak = 0;
      size = Math.max(1, Math.min(size, failure.blocks));
    }
    return failure;
  }

  /** One call over [from, to]; undefined when the provider refused the range (it shrank). */
  async function once(from: number, to: number): Promise<T[] | undefined> {
    for (let attempt = 0; ; attempt++) {
      try {
        const logs = await options.fetch(from, to);
        succeeded();
        return logs;
      } catch (error) {
        const failure = failed(error, to - from + 1);
        if (failure.kind === 'range') {
          // A single block refused has nowhere smaller to go.
          if (from === to) throw error;
          return undefined;
        }
        if (attempt >= retries || options.stopped?.()) throw error;
        await new Promise((resolve) => setTimeout(resolve, pauseMs * 2 ** attempt));
      }
    }
  }

  return {
    /** How many blocks the next call asks for at most. */
    blocksPerCall: () => size,
    succeeded,
    failed,
    /** Every log in [from, to], in block order, over as many calls as the provider needs. */
    async read(from: number, to: number): Promise<T[]> {
      const found: T[] = [];
      for (let start = from; start <= to; ) {
        const end = Math.min(to, start + size - 1);
        const logs = await once(start, end);
        if (logs === undefined) continue;
        found.push(...logs);
        start = end + 1;
      }
      return found;
    },
  };
}
export type LogSource<T> = ReturnType<typeof createLogSource<T>>;
