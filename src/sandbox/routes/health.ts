import { Health } from '../../api/schemas/index.ts';
import { VERSION } from '../../version.ts';
import type { App, RouteDeps } from './types.ts';

export function registerHealthRoutes(
  app: App,
  { limits, chain, index, databaseHealth: probe }: RouteDeps,
): void {
  app.get(
    '/health',
    { schema: { response: { 200: Health } }, onRequest: limits.public },
    async () => {
      const [connected, databaseHealth] = await Promise.all([chain.isConnected(), probe?.()]);
      const indexFailure = index.failure();
      const reason =
        databaseHealth?.reachable === false
          ? `${databaseHealth.reason}; requests that need it answer 503 until it is back`
          : !connected
            ? "the chain's RPC endpoint does not answer, or the chain is being rebuilt"
            : indexFailure && `${indexFailure}; /v1 and GraphQL answer 503 while it lasts`;
      return {
        status: reason ? 'degraded' : 'ok',
        ...(reason && { reason }),
        version: VERSION,
        chain_id: chain.chainId,
        chain_name: chain.chainName,
        rpc_connected: connected,
        ...(databaseHealth && { database: databaseHealth }),
      };
    },
  );
}
