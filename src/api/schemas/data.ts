import { z } from 'zod';

/**
 * Part B, the data API (REST under /v1): its shapes, bounds and enums. Field names are the
 * spec's where it shows them; the rest is documented in docs/data-api.md. Amounts are integer
 * strings in raw units, enum values lowercase strings, timestamps ISO 8601 UTC.
 */

/** Any case of 0x plus 40 hex digits (the data API does not insist on a checksum). */
export const DataAddress = z.string().regex(/^0x[0-9a-fA-F]{40}$/, {
  error: 'must be 0x followed by 40 hex digits',
});

export const RawAmount = z.string().regex(/^-?\d+$/);
export const IsoTime = z.string();

export const DATA_TRANSACTION_TYPES = [
  'deposit',
  'withdraw',
  'deposit_request',
  'redeem_request',
  'claim',
] as const;
export const DATA_TRANSACTION_STATUSES = ['pending', 'fulfilled', 'claimed', 'failed'] as const;
export const DATA_PAGE_DEFAULT_LIMIT = 50;
export const DATA_PAGE_MAX_LIMIT = 100;

/** The spec's REST error body, and its codes (ours are marked). */
export const DATA_ERROR_CODES = {
  VAULT_NOT_FOUND: 404,
  INVALID_ADDRESS: 400,
  RATE_LIMITED: 429,
  INTERNAL_ERROR: 500,
  // Ours: a bad query parameter (named in details.parameter), an unknown strategy, a path
  // that is not part of the data API.
  INVALID_PARAMETER: 400,
  STRATEGY_NOT_FOUND: 404,
  NOT_FOUND: 404,
} as const;
export type DataErrorCode = keyof typeof DATA_ERROR_CODES;

export const DataError = z.object({
  error: z.object({
    code: z.string(),
    message: z.string(),
    details: z.record(z.string(), z.unknown()),
  }),
});
export type DataError = z.infer<typeof DataError>;

export const UserParams = z.object({ address: DataAddress });

const pageNumber = (name: string, min: number, max: number) =>
  z.coerce
    .number({ error: `${name} must be a whole number` })
    .int({ error: `${name} must be a whole number` })
    .min(min, { error: `${name} must be at least ${min}` })
    .max(max, { error: `${name} must be at most ${max}` });

export const TransactionsQuery = z.object({
  type: z
    .enum(DATA_TRANSACTION_TYPES, {
      error: `type must be one of ${DATA_TRANSACTION_TYPES.join(', ')}`,
    })
    .optional(),
  limit: pageNumber('limit', 1, DATA_PAGE_MAX_LIMIT).default(DATA_PAGE_DEFAULT_LIMIT),
  offset: pageNumber('offset', 0, Number.MAX_SAFE_INTEGER).default(0),
});

export const DataTransaction = z.object({
  hash: z.string(),
  type: z.enum(DATA_TRANSACTION_TYPES),
  vault: z.string(),
  user: z.string(),
  amount: RawAmount,
  shares: RawAmount.nullable(),
  status: z.enum(DATA_TRANSACTION_STATUSES),
  timestamp: IsoTime,
  blockNumber: z.number().int(),
  logIndex: z.number().int(),
});

export const UserTransactions = z.object({
  address: z.string(),
  transactions: z.array(DataTransaction),
  total: z.number().int(),
  limit: z.number().int(),
  offset: z.number().int(),
});

export const DataPosition = z.object({
  vault: z.string(),
  vaultName: z.string(),
  shares: RawAmount,
  value: RawAmount,
  pnl: RawAmount,
  pnlPercent: z.number(),
  depositedAt: IsoTime.nullable(),
  pendingDeposit: RawAmount,
  claimableDeposit: RawAmount,
  pendingRedeem: RawAmount,
  claimableRedeem: RawAmount,
});

export const UserPositions = z.object({
  address: z.string(),
  positions: z.array(DataPosition),
});
