import { createConnection, createServer, type Server, type Socket } from 'node:net';

/**
 * Most connections the gateway carries at once; more are closed as soon as they are accepted.
 * Each is two file descriptors (plugins/connections.ts keeps them back from client sockets)
 * and a pair of sockets whose buffers `pipe` bounds (it pauses the reader while the writer
 * is full), so this bounds its memory too.
 */
export const RPC_GATEWAY_CONNECTIONS = 32;

/**
 * The chain's RPC URL as others see it (`rpc_url`): a TCP relay on a port of its own to the
 * anvil that holds the chain, which listens on another loopback port (the sandbox's own calls
 * go there directly).
 *
 * While the chain is being rebuilt the gateway is closed: every connection it carries is
 * dropped and new ones are dropped as soon as they are accepted, so no one reads a chain that
 * is only partly rebuilt, or sends transactions into it. A client sees the node as
 * unreachable and tries again.
 */
export async function startRpcGateway(): Promise<RpcGateway> {
  let target: number | undefined;
  const open = new Set<Socket>();
  const server: Server = createServer({ pauseOnConnect: true }, (client) => {
    if (target === undefined || open.size >= RPC_GATEWAY_CONNECTIONS * 2) {
      client.destroy();
      return;
    }
    const node = createConnection({ host: '127.0.0.1', port: target });
    for (const socket of [client, node]) {
      open.add(socket);
      socket.setNoDelay(true);
      socket.once('close', () => {
        open.delete(socket);
        client.destroy();
        node.destroy();
      });
      // A reset on either side ends the pair (through 'close'); nothing to report.
      socket.on('error', () => undefined);
    }
    client.pipe(node);
    node.pipe(client);
    client.resume();
  });
  server.maxConnections = RPC_GATEWAY_CONNECTIONS;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  const { port } = server.address() as { port: number };
  return {
    url: `http://127.0.0.1:${port}`,
    openTo(port: number): void {
      target = port;
    },
    close(): void {
      target = undefined;
      for (const socket of open) socket.destroy();
    },
    async stop(): Promise<void> {
      target = undefined;
      for (const socket of open) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

export interface RpcGateway {
  /** The RPC URL everyone uses; it never changes while serve runs. */
  readonly url: string;
  /** Relays connections from now on to anvil on `port` (loopback). */
  openTo(port: number): void;
  /** Drops every connection, and every new one until the next openTo. */
  close(): void;
  /** Stops listening (shutdown). */
  stop(): Promise<void>;
}
