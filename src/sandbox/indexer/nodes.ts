import type { z } from 'zod';
import type { DataNode } from '../../api/schemas/index.ts';
import type { SandboxChain } from '../chain/index.ts';
import type { Store } from '../store/index.ts';
import { isoTime } from './reads.ts';

/** A registered node counts as online this long after its key was last used. */
const ONLINE_FOR_MS = 5 * 60_000;
let clientVersion: string | undefined;

/**
 * GET /v1/nodes: the chain node the sandbox runs on, measured now (its head block and the
 * round trip of asking for it), then every node registered with POST /sandbox/nodes, online
 * while its key has been used in the last five minutes. A registered node reports no block or
 * latency: the sandbox does not reach it.
 */
export async function nodeList(
  chain: SandboxChain,
  store: Store,
  /** When each node last used its key, in sandbox milliseconds. */
  lastSeen: Map<string, number>,
): Promise<Array<z.input<typeof DataNode>>> {
  const started = performance.now();
  let blockNumber: number | null = null;
  try {
    blockNumber = Number(await chain.publicClient.getBlockNumber({ cacheTime: 0 }));
    clientVersion ??= await chain.publicClient.request({ method: 'web3_clientVersion' });
  } catch {
    // Offline: listed as such.
  }
  const latencyMs = Math.round((performance.now() - started) * 100) / 100;
  const own = {
    id: 'sandbox',
    name: chain.dev ? 'sandbox chain (anvil)' : `sandbox chain (${chain.chainName})`,
    operator: chain.treasury.address,
    status: blockNumber === null ? ('offline' as const) : ('online' as const),
    blockNumber,
    lastSeen: blockNumber === null ? null : isoTime(Math.floor(chain.nowSeconds())),
    latencyMs: blockNumber === null ? null : latencyMs,
    version: clientVersion ?? null,
  };
  const now = chain.nowSeconds() * 1000;
  const registered = (await store.nodes.list()).map((node) => {
    const seen = lastSeen.get(node.node_id);
    return {
      id: node.node_id,
      name: node.name,
      operator: node.operator_address,
      status:
        seen !== undefined && now - seen < ONLINE_FOR_MS
          ? ('online' as const)
          : ('offline' as const),
      blockNumber: null,
      lastSeen: seen === undefined ? null : isoTime(Math.floor(seen / 1000)),
      latencyMs: null,
      version: null,
    };
  });
  return [own, ...registered];
}
