import { connect, type Socket } from 'node:net';
import { describe, expect, it } from 'vitest';
import { RPC_GATEWAY_CONNECTIONS } from '../../src/sandbox/chain/rpc-gateway.ts';
import { registerOver, rpcCall, useServes } from '../helpers/serve.ts';

const serves = useServes('rpc-relay', 'relay-test-admin');
const { serve, request } = serves;

/** A TCP connection to `url`'s port; resolves once it is open. */
function open(url: string): Promise<Socket> {
  const { port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), '127.0.0.1', () => resolve(socket));
    socket.once('error', reject);
  });
}

describe("the RPC URL's relay", () => {
  it('carries a bounded number of connections: idle ones past it are dropped, and writes go on', async () => {
    const sandbox = await serve([]);
    const { apiKey } = await registerOver(sandbox.url);
    const rpcUrl = (await request(sandbox.url, 'GET', '/sandbox/info')).body.rpc_url as string;
    const held: Socket[] = [];
    const closed = new Set<Socket>();
    try {
      // Connections that send nothing, well past the bound.
      for (let i = 0; i < RPC_GATEWAY_CONNECTIONS * 3; i++) {
        const socket = await open(rpcUrl).catch(() => undefined);
        if (!socket) continue;
        socket.on('error', () => undefined);
        socket.once('close', () => closed.add(socket));
        held.push(socket);
      }
      // Those past the bound are closed by the relay, not kept open.
      await expect
        .poll(() => held.length - closed.size, { timeout: 10_000 })
        .toBeLessThanOrEqual(RPC_GATEWAY_CONNECTIONS);
      // The sandbox's own writes do not go through the relay, and are not held up by it.
      const deposit = await request(
        sandbox.url,
        'POST',
        '/api/v1/agent/vault/deposit',
        { vault_id: 'moderate', amount_usdc: 1 },
        apiKey,
      );
      expect(deposit.status).toBe(200);
      // Once the idle ones go, the relay carries new connections again.
      for (const socket of held) socket.destroy();
      await expect
        .poll(() => rpcCall(rpcUrl, 'eth_chainId').catch(() => undefined), { timeout: 10_000 })
        .toBe('0x14a34');
    } finally {
      for (const socket of held) socket.destroy();
    }
  });
});
