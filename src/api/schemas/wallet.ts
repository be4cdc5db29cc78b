import { z } from 'zod';

export const WalletStatus = z.object({
  configured: z.boolean(),
  agent_address: z.string(),
  network: z.string(),
  chain_id: z.number().int(),
  eth_balance: z.string(),
  eth_balance_wei: z.string(),
  has_gas: z.boolean(),
  usdc_balance: z.number(),
  usdc_balance_raw: z.string(),
});

export const FaucetSuccess = z.object({
  success: z.literal(true),
  agent_address: z.string(),
  tx_hash: z.string(),
  status: z.string(),
  drip_amount_wei: z.string(),
  drip_amount_eth: z.string(),
});

/** The faucet's cooldown answer; it is also an error body (it carries `error`). */
export const FaucetCooldown = z.object({
  success: z.literal(false),
  agent_address: z.string(),
  error: z.string(),
  next_eligible_timestamp: z.number().int(),
  seconds_remaining: z.number().int(),
});
