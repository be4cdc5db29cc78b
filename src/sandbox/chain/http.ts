import { Agent, fetch as undiciFetch } from 'undici';

/**
 * Most HTTP connections the sandbox opens to its node. A burst of writes queues on these
 * instead of opening a socket each, so the file descriptors a write needs are bounded
 * (see RESERVED_FILE_DESCRIPTORS) and client connections cannot starve them.
 */
export const NODE_CONNECTIONS = 32;

const dispatcher = new Agent({ connections: NODE_CONNECTIONS, keepAliveTimeout: 30_000 });

/** `fetch` for the node's JSON-RPC: the sandbox's own calls and viem's share one bounded pool. */
export const nodeFetch = ((input: string | URL, init?: RequestInit) =>
  undiciFetch(input, { ...(init as object), dispatcher })) as unknown as typeof fetch;
