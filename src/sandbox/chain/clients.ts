import {
  type Chain,
  createPublicClient,
  createTestClient,
  defineChain,
  http,
  type PublicClient,
  parseGwei,
  type Transport,
} from 'viem';
import { nodeFetch } from './http.ts';
import type { FeePolicy } from './wallets.ts';

/**
 * Fees on the sandbox's own chain: a cap far above its base fee (which only falls, as its
 * blocks are never half full) and no tip. Fixed, so that signing needs no round trip.
 */
export const SANDBOX_FEES: FeePolicy = {
  maxFeePerGas: parseGwei('10'),
  maxPriorityFeePerGas: 0n,
};

/**
 * The base fee the block producer puts back when someone raised it over the RPC URL above
 * what SANDBOX_FEES pay (anvil_setNextBlockBaseFeePerGas): anvil's own starting base fee.
 */
export const SANDBOX_BASE_FEE = parseGwei('1');

/** viem clients for the routes' reads and the dev methods, on one keep-alive transport. */
export function createChainClients(
  rpcUrl: string,
  chainId: number,
  chainName: string,
  fetchFn: typeof fetch = nodeFetch,
) {
  const chain = defineChain({
    id: chainId,
    name: chainName,
    nativeCurrency: { name: 'Ether', symbol: 'ETH', decimals: 18 },
    rpcUrls: { default: { http: [rpcUrl] } },
  });
  // No automatic retries: a resent eth_sendRawTransaction whose first attempt landed would
  // be reported as a failure of a transaction that happened.
  const transport = http(rpcUrl, { retryCount: 0, timeout: 30_000, fetchFn });
  const publicClient: PublicClient<Transport, Chain> = createPublicClient({
    chain,
    transport,
    pollingInterval: 50,
  });
  const testClient = createTestClient({ chain, transport, mode: 'anvil' });
  return { chain, publicClient, testClient };
}
