import { z } from 'zod';
import { Address, decimalAmount, requiredOr } from './common.ts';
import { VAULT_IDS } from './values.ts';
export const VaultId = z.enum(VAULT_IDS, {
  error: requiredOr(`must be one of ${VAULT_IDS.join(', ')}`),
});
export type VaultId = z.infer<typeof VaultId>;

/** More USDC than exists; also keeps raw amounts (× 10^6) exact as JSON numbers. */
export const MAX_USDC_AMOUNT = 1_000_000_000;

/** USDC has 6 decimals; an amount with more cannot be represented onchain. */
export const USDC_DECIMALS = 6;

/** A USDC amount as exact decimal text, for example "12.5". */
export const UsdcAmount = decimalAmount(USDC_DECIMALS, MAX_USDC_AMOUNT);

export const DepositRequest = z.object({
  vault_id: VaultId,
  amount_usdc: UsdcAmount,
});
export type DepositRequest = z.infer<typeof DepositRequest>;

export const DepositResult = z.object({
  success: z.boolean(),
  agent_address: z.string(),
  vault: z.string(),
  vault_address: z.string(),
  amount_usdc: z.number(),
  approve_tx: z.string(),
  deposit_tx: z.string(),
  status: z.string(),
  shares_balance: z.string(),
  /**
   * Sandbox additions, for a deposit into the ERC-7540 vault (status "pending"): the
   * request's id, and when (sandbox Unix seconds) the operator may fulfil it.
   */
  request_id: z.string().optional(),
  fulfillable_at: z.number().int().optional(),
});

export const Vault = z.object({
  /** Sandbox addition: the identifier deposit takes. */
  vault_id: z.string().optional(),
  address: z.string(),
  name: z.string(),
  asset: z.string(),
  total_assets: z.string(),
  apy: z.number(),
  status: z.string(),
});
export const VaultList = z.object({ vaults: z.array(Vault), total: z.number().int() });

export const Position = z.object({
  /** Sandbox addition: the identifier deposit takes. */
  vault_id: z.string().optional(),
  vault_address: z.string(),
  vault_name: z.string(),
  shares: z.string(),
  value_usdc: z.string(),
});
export const Positions = z.object({ positions: z.array(Position) });

/** Body of the public POST /api/v1/nfts and POST /api/v1/positions. */
export const WalletAddressBody = z.object({ wallet_address: Address });

/** Answer of the public POST /api/v1/positions: any wallet's vault shares, read onchain. */
export const WalletPositions = z.object({
  wallet_address: z.string(),
  positions: z.array(Position),
  total_value_usdc: z.string(),
});
