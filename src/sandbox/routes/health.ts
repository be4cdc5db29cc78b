import { Health } from '../../api/schemas/index.ts';
import { VERSION } from '../../version.ts';
import type { App, RouteDeps } from './types.ts';

export function registerHealthRoutes(app: App, { limits, chain }: RouteDeps): void {
  app.get(
    '/health',
    { schema: { response: { 200: Health } }, onRequest: limits.public },
    async () => {
      const connected = await chain.isConnected();
      return {
        status: connected ? 'ok' : 'degraded',
        version: VERSION,
        chain_id: chain.chainId,
        chain_name: chain.chainName,
        rpc_connected: connected,
      };
    },
  );
}
