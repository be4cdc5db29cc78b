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
  // Ours: a bad query parameter (named in details.parameter), an X-API-Key that is no key,
  // an unknown strategy, a path that is not part of the data API, and an index (index.db)
  // that failed and is being rebuilt from the chain (retry shortly).
  INVALID_PARAMETER: 400,
  INVALID_API_KEY: 401,
  STRATEGY_NOT_FOUND: 404,
  NOT_FOUND: 404,
  INDEX_UNAVAILABLE: 503,
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
  /** null for a failed call, which logged nothing. */
  logIndex: z.number().int().nullable(),
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

export const RISK_LEVELS = ['conservative', 'moderate', 'aggressive'] as const;
/** The spec's StrategyStatus, lowercase; Part A's lifecycle maps onto it (docs/data-api.md). */
export const DATA_STRATEGY_STATUSES = ['shadow', 'evolution', 'live', 'deprecated'] as const;
export const VAULT_ORDERS = [
  'tvl_desc',
  'tvl_asc',
  'apy_desc',
  'apy_asc',
  'created_at_desc',
  'created_at_asc',
] as const;
/** History periods and intervals, with their length in seconds (`all`: since creation). */
export const HISTORY_PERIODS = { '7d': 7, '30d': 30, '90d': 90, '1y': 365, all: null } as const;
export const HISTORY_INTERVALS = {
  '1h': 3600,
  '4h': 4 * 3600,
  '1d': 86_400,
  '1w': 7 * 86_400,
} as const;
/** A history answers at most this many points; a longer one asks for a coarser interval. */
export const HISTORY_MAX_POINTS = 10_000;

const choice = <T extends readonly [string, ...string[]]>(name: string, values: T) =>
  z.enum(values, { error: `${name} must be one of ${values.join(', ')}` });

const minNumber = (name: string) =>
  z.coerce
    .number({ error: `${name} must be a number` })
    .refine(Number.isFinite, { error: `${name} must be a number` });

export const VaultParams = z.object({ address: DataAddress });

export const VaultsQuery = z.object({
  riskLevel: choice('riskLevel', RISK_LEVELS).optional(),
  /** Raw units, as tvl. */
  minTvl: z
    .string()
    .regex(/^\d{1,78}$/, { error: 'minTvl must be a whole number of raw units' })
    .optional(),
  orderBy: choice('orderBy', VAULT_ORDERS).optional(),
});

export const DataVaultItem = z.object({
  address: z.string(),
  name: z.string(),
  symbol: z.string(),
  tvl: RawAmount,
  tvlUsd: z.number(),
  apy: z.number(),
  riskLevel: z.enum(RISK_LEVELS),
  strategies: z.number().int(),
  isERC7540: z.boolean(),
  fulfillmentDelay: z.number().int().nullable(),
  createdAt: IsoTime,
});

export const DataVaultList = z.object({
  vaults: z.array(DataVaultItem),
  totalTvl: RawAmount,
  totalTvlUsd: z.number(),
});

export const DataVaultDetail = z.object({
  address: z.string(),
  name: z.string(),
  symbol: z.string(),
  asset: z.string(),
  tvl: RawAmount,
  tvlUsd: z.number(),
  totalShares: RawAmount,
  pricePerShare: RawAmount,
  apy: z.object({
    current: z.number(),
    '7d': z.number(),
    '30d': z.number(),
    inception: z.number(),
  }),
  fees: z.object({ management: z.number(), performance: z.number(), hurdle: z.number() }),
  riskLevel: z.enum(RISK_LEVELS),
  strategies: z.array(
    z.object({ id: z.string(), name: z.string(), allocation: z.number(), apy: z.number() }),
  ),
  isERC7540: z.boolean(),
  fulfillmentDelay: z.number().int().nullable(),
  createdAt: IsoTime,
});

export const HistoryQuery = z.object({
  period: choice('period', Object.keys(HISTORY_PERIODS) as [keyof typeof HISTORY_PERIODS]).default(
    '30d',
  ),
  interval: choice(
    'interval',
    Object.keys(HISTORY_INTERVALS) as [keyof typeof HISTORY_INTERVALS],
  ).default('1d'),
});

export const VaultHistory = z.object({
  address: z.string(),
  period: z.string(),
  interval: z.string(),
  points: z.array(
    z.object({ timestamp: IsoTime, tvl: RawAmount, apy: z.number(), pricePerShare: RawAmount }),
  ),
});

export const StrategiesQuery = z.object({
  status: choice('status', DATA_STRATEGY_STATUSES).optional(),
  minSharpe: minNumber('minSharpe').optional(),
});

export const StrategyParams = z.object({
  id: z.string().regex(/^0x[0-9a-fA-F]{64}$/, {
    error: 'must be a strategy id: 0x followed by 64 hex digits',
  }),
});

export const DataStrategy = z.object({
  id: z.string(),
  name: z.string(),
  agentName: z.string().nullable(),
  vault: z.string().nullable(),
  status: z.enum(DATA_STRATEGY_STATUSES),
  allocation: z.number(),
  apy: z.number(),
  riskScore: z.number().int(),
  sharpeRatio: z.number(),
  maxDrawdown: z.number(),
});
export const DataStrategyList = z.object({ strategies: z.array(DataStrategy) });

export const StrategyPerformance = z.object({
  id: z.string(),
  name: z.string(),
  status: z.enum(DATA_STRATEGY_STATUSES),
  apy: z.number(),
  sharpeRatio: z.number(),
  maxDrawdown: z.number(),
  returns: z.array(z.object({ timestamp: IsoTime, value: z.number() })),
});

export const DataNode = z.object({
  id: z.string(),
  name: z.string(),
  operator: z.string(),
  status: z.enum(['online', 'offline']),
  blockNumber: z.number().int().nullable(),
  lastSeen: IsoTime.nullable(),
  latencyMs: z.number().nullable(),
  version: z.string().nullable(),
});
export const DataNodeList = z.object({ nodes: z.array(DataNode) });

export const ProtocolStats = z.object({
  totalTvl: RawAmount,
  totalTvlUsd: z.number(),
  vaults: z.number().int(),
  strategies: z.number().int(),
  liveStrategies: z.number().int(),
  agents: z.number().int(),
  users: z.number().int(),
  transactions: z.number().int(),
  volume24h: RawAmount,
  blockNumber: z.number().int(),
  updatedAt: IsoTime,
});
