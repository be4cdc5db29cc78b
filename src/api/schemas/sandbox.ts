import { z } from 'zod';
import { Address, boundedInt, Tier } from './common.ts';

/** The sandbox admin API (header X-Admin-Token). Not part of the live service. */

/** Ten years: far enough for any cooldown, small enough to keep dates sane. */
export const MAX_CLOCK_ADVANCE_SECONDS = 10 * 365 * 24 * 3600;
/** The clock never runs more than a century ahead, so every date stays representable. */
export const MAX_CLOCK_OFFSET_SECONDS = 100 * 365 * 24 * 3600;

export const ClockState = z.object({
  now: z.number().int(),
  offset_seconds: z.number().int(),
});
export type ClockState = z.infer<typeof ClockState>;

export const AdvanceClockRequest = z.object({
  seconds: boundedInt(1, MAX_CLOCK_ADVANCE_SECONDS),
});

export const SetTierRequest = z.object({ wallet_address: Address, tier: Tier });
export const SetTierResponse = z.object({ wallet_address: z.string(), tier: z.string() });

export const SandboxInfo = z.object({
  version: z.string(),
  chain_id: z.number().int(),
  clock: ClockState,
  state_dir: z.string(),
  persistent: z.boolean(),
  rate_limit: z.boolean(),
});
export type SandboxInfo = z.infer<typeof SandboxInfo>;
