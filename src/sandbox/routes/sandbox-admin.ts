import {
  AdvanceClockRequest,
  CHAIN_ID,
  ClockState,
  MAX_CLOCK_OFFSET_SECONDS,
  SandboxInfo,
  SetTierRequest,
  SetTierResponse,
} from '../../api/schemas/index.ts';
import { VERSION } from '../../version.ts';
import { HttpError } from '../errors.ts';
import { createAdminGuard } from '../plugins/auth.ts';
import type { App, RouteDeps } from './types.ts';

export interface AdminDeps {
  adminToken: string;
  stateDir: string;
  persistent: boolean;
  rateLimit: boolean;
}

/** The sandbox admin API under /sandbox: not part of the live service. */
export function registerSandboxAdminRoutes(
  app: App,
  { store, clock }: RouteDeps,
  admin: AdminDeps,
): void {
  const onRequest = createAdminGuard(admin.adminToken);
  const clockState = () => ({ now: clock.nowSeconds(), offset_seconds: clock.offsetSeconds() });

  app.get('/sandbox/info', { onRequest, schema: { response: { 200: SandboxInfo } } }, async () => ({
    version: VERSION,
    chain_id: CHAIN_ID,
    clock: clockState(),
    state_dir: admin.stateDir,
    persistent: admin.persistent,
    rate_limit: admin.rateLimit,
  }));

  app.post(
    '/sandbox/clock/advance',
    { onRequest, schema: { body: AdvanceClockRequest, response: { 200: ClockState } } },
    async (request) => {
      if (clock.offsetSeconds() + request.body.seconds > MAX_CLOCK_OFFSET_SECONDS) {
        throw new HttpError(
          400,
          `seconds: the sandbox clock may run at most ${MAX_CLOCK_OFFSET_SECONDS} s ahead; it is ${clock.offsetSeconds()} s ahead now`,
        );
      }
      clock.advance(request.body.seconds);
      return clockState();
    },
  );

  app.post(
    '/sandbox/agents/tier',
    { onRequest, schema: { body: SetTierRequest, response: { 200: SetTierResponse } } },
    async (request) => {
      const { wallet_address, tier } = request.body;
      if (!store.agents.setTier(wallet_address, tier)) {
        throw new HttpError(404, `no agent is registered for wallet ${wallet_address}`);
      }
      return { wallet_address, tier };
    },
  );
}
