import { type AddressInfo, connect, createServer, type Socket } from 'node:net';

/**
 * A TCP proxy in front of a service (PostgreSQL, say), that can cut it off for real: while
 * `cut`, every connection through it is reset and new ones are reset as they come, as a
 * network that drops the service would; `restore` lets connections through again.
 */
export interface TcpCut {
  /** The proxy's port on 127.0.0.1. */
  port: number;
  cut(): void;
  restore(): void;
  close(): Promise<void>;
}

export async function startTcpCut(target: { host: string; port: number }): Promise<TcpCut> {
  const open = new Set<Socket>();
  let cutOff = false;
  const server = createServer((client) => {
    if (cutOff) {
      client.resetAndDestroy();
      return;
    }
    const upstream = connect(target.port, target.host);
    open.add(client);
    open.add(upstream);
    const end = () => {
      client.destroy();
      upstream.destroy();
      open.delete(client);
      open.delete(upstream);
    };
    client.on('error', end).on('close', end);
    upstream.on('error', end).on('close', end);
    client.pipe(upstream);
    upstream.pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    cut() {
      cutOff = true;
      for (const socket of open) socket.resetAndDestroy();
      open.clear();
    },
    restore() {
      cutOff = false;
    },
    close() {
      for (const socket of open) socket.destroy();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}
