import { z } from 'zod';
import { boundedInt, boundedText, nameText } from './common.ts';

/** Risk parameters with the spec's bounds and defaults. */
export const RISK_BOUNDS = {
  max_position_size_percent: { min: 1, max: 100, default: 10 },
  max_leverage: { min: 100, max: 1000, default: 200 },
  stop_loss_percent: { min: 50, max: 5000, default: 500 },
  slippage_tolerance_bps: { min: 1, max: 1000, default: 100 },
  correlation_threshold: { min: 0, max: 100, default: 70 },
  velocity_limit: { min: 1000, max: Number.MAX_SAFE_INTEGER, default: 1_000_000 },
} as const;

const risk = (field: keyof typeof RISK_BOUNDS) => {
  const { min, max, default: fallback } = RISK_BOUNDS[field];
  return boundedInt(min, max).default(fallback);
};

export const RiskParams = z.object({
  max_position_size_percent: risk('max_position_size_percent'),
  max_leverage: risk('max_leverage'),
  stop_loss_percent: risk('stop_loss_percent'),
  slippage_tolerance_bps: risk('slippage_tolerance_bps'),
  correlation_threshold: risk('correlation_threshold'),
  velocity_limit: risk('velocity_limit'),
  flash_loans_enabled: z.boolean({ error: 'must be true or false' }).default(false),
});

export const StrategySubmitRequest = RiskParams.extend({
  name: nameText(3, 100),
  description: boundedText(10, 2000),
  dna_string: z
    .string()
    .regex(/^(0x)?[0-9a-fA-F]{64}$/, { error: 'must be 32 bytes: 64 hex digits, 0x optional' })
    .transform((dna) => `0x${dna.replace(/^0x/, '').toLowerCase()}`)
    .optional(),
});
export type StrategySubmitRequest = z.input<typeof StrategySubmitRequest>;

export const StrategySubmitResult = z.object({
  success: z.boolean(),
  agent_address: z.string(),
  strategy_name: z.string(),
  strategy_id: z.string(),
  dna_string: z.string(),
  risk_params: z.object({
    max_position_size_percent: z.number(),
    max_leverage: z.number(),
    stop_loss_percent: z.number(),
    slippage_tolerance_bps: z.number(),
    correlation_threshold: z.number(),
    velocity_limit: z.number(),
    flash_loans_enabled: z.boolean(),
  }),
  tx_hash: z.string(),
  status: z.string(),
  block_number: z.number().int(),
  gas_used: z.number().int(),
});

export const Strategy = z.object({
  strategy_id: z.string(),
  name: z.string(),
  description: z.string(),
  status: z.string(),
  created_at: z.number().int(),
  last_status_change: z.number().int(),
  strategy_contract: z.string(),
});
export const StrategyList = z.object({
  agent_address: z.string(),
  strategies: z.array(Strategy),
  total_count: z.number().int(),
});
