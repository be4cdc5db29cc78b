import { CHAIN_ID, CHAIN_NAME, Health } from '../../api/schemas/index.ts';
import { VERSION } from '../../version.ts';
import type { App, RouteDeps } from './types.ts';

export function registerHealthRoutes(app: App, { limits }: RouteDeps): void {
  app.get(
    '/health',
    { schema: { response: { 200: Health } }, onRequest: limits.public },
    async () => ({
      status: 'ok',
      version: VERSION,
      chain_id: CHAIN_ID,
      chain_name: CHAIN_NAME,
      // The sandbox chain (anvil) arrives with the chain issue; until then there is no RPC.
      rpc_connected: false,
    }),
  );
}
