import { z } from 'zod';
import { Address } from './common.ts';
import { Position } from './vaults.ts';

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
  /** Sandbox additions the spec mentions without naming them. */
  protocol_token_balance: z.string().optional(),
  positions: z.array(Position).optional(),
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

/** One condition of the campaign; `eligible` is true when every one is met. */
export const EligibilityCriterion = z.object({
  id: z.string(),
  description: z.string(),
  met: z.boolean(),
});
export const Eligibility = z.object({
  eligible: z.boolean(),
  agent_address: z.string(),
  campaign: z.string(),
  criteria: z.array(EligibilityCriterion),
});

export const NftHolding = z.object({
  contract_address: z.string(),
  collection_name: z.string(),
  symbol: z.string(),
  token_id: z.string(),
});
export const NftHoldings = z.object({
  wallet_address: Address,
  nfts: z.array(NftHolding),
  total: z.number().int(),
});
