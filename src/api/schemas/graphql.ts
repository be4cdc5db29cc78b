import { z } from 'zod';
import {
  DATA_PAGE_MAX_LIMIT,
  DATA_STRATEGY_STATUSES,
  DATA_TRANSACTION_STATUSES,
  DATA_TRANSACTION_TYPES,
  type HISTORY_INTERVALS,
  type HISTORY_PERIODS,
  RISK_LEVELS,
  VAULT_ORDERS,
} from './data.ts';

/**
 * Part B's GraphQL half (/graphql): its enums, which are the REST enums in upper case (and the
 * named periods and intervals), its limits, and the shapes a client parses (the response
 * envelope and the two subscriptions' events). The schema itself is built from these in
 * src/sandbox/graphql/schema.ts and committed as schema.graphql.
 */

export const upper = <T extends string>(value: T) => value.toUpperCase() as Uppercase<T>;
const uppers = <T extends string>(values: readonly T[]) => values.map(upper);

export const GRAPHQL_ENUMS = {
  RiskLevel: uppers(RISK_LEVELS),
  StrategyStatus: uppers(DATA_STRATEGY_STATUSES),
  TransactionType: uppers(DATA_TRANSACTION_TYPES),
  TransactionStatus: uppers(DATA_TRANSACTION_STATUSES),
  VaultOrderBy: uppers(VAULT_ORDERS),
  NodeStatus: ['ONLINE', 'OFFLINE'],
} as const;

/** GraphQL's Period and Interval values, by the REST value each stands for. */
export const GRAPHQL_PERIODS: Record<string, keyof typeof HISTORY_PERIODS> = {
  WEEK: '7d',
  MONTH: '30d',
  QUARTER: '90d',
  YEAR: '1y',
  ALL: 'all',
};
export const GRAPHQL_INTERVALS: Record<string, keyof typeof HISTORY_INTERVALS> = {
  HOUR: '1h',
  FOUR_HOURS: '4h',
  DAY: '1d',
  WEEK: '1w',
};

/** What /graphql allows; documented in docs/data-api.md. */
export const GRAPHQL_LIMITS = {
  /**
   * Nested fields in an operation (vaults → strategies → id is 3). The schema has no cycles, so
   * a data query is at most 4 deep; this bounds introspection (GraphiQL's is 15).
   */
  maxDepth: 16,
  /** Aliased fields in one document. */
  maxAliases: 20,
  /** Cost: 1 a field, times the length of every list above it (see graphql/limits.ts). */
  maxCost: 20_000,
  /** userTransactions' limit, as /v1's. */
  maxLimit: DATA_PAGE_MAX_LIMIT,
  /** Bytes of a query document. */
  maxQueryBytes: 16 * 1024,
  /**
   * Errors in one answer (validation stops there): an answer's errors cost what the document
   * does, not what it can be made to fail.
   */
  maxErrors: 20,
  /** A WebSocket must send connection_init within this, or it is closed with 4408. */
  connectionInitTimeoutMs: 10_000,
  /** Subscriptions open at once on one WebSocket. */
  maxSubscriptionsPerSocket: 20,
  /**
   * A subscribe counts one request of its tier per this much of its cost (at least one), when
   * it starts: every event it receives is that work again.
   */
  subscriptionCostPerRequest: 100,
  /** Events of one topic waiting to be executed and sent; past it an event is skipped. */
  maxQueuedEvents: 256,
  /**
   * Bytes waiting in a socket's send buffer, whatever the frame (a pong too); a frame that
   * would pass it closes the socket with 4499.
   */
  maxBufferedBytes: 1024 * 1024,
  /**
   * Bytes held for the distinct subscriptions at once, in all: each one's document text with
   * its variables, and its parsed document (estimated by its objects, arrays and strings; up to
   * about 50 times the text). A new distinct one past it is refused.
   */
  maxLiveDocumentBytes: 8 * 1024 * 1024,
} as const;
export type GraphqlLimits = { -readonly [K in keyof typeof GRAPHQL_LIMITS]: number };

/** The error codes in extensions.code. */
export const GRAPHQL_ERROR_CODES = [
  'NOT_FOUND',
  'BAD_USER_INPUT',
  'GRAPHQL_PARSE_FAILED',
  'GRAPHQL_VALIDATION_FAILED',
  'QUERY_TOO_COMPLEX',
  'UNAUTHENTICATED',
  'RATE_LIMITED',
  'INTERNAL_SERVER_ERROR',
  'INDEX_UNAVAILABLE',
] as const;

export const GraphqlError = z.looseObject({
  message: z.string(),
  locations: z.array(z.object({ line: z.number(), column: z.number() })).optional(),
  path: z.array(z.union([z.string(), z.number()])).optional(),
  extensions: z.looseObject({ code: z.string().optional() }).optional(),
});
export type GraphqlError = z.infer<typeof GraphqlError>;

/** A GraphQL response: data, errors, or both. Unknown fields are kept. */
export const GraphqlResponse = z.looseObject({
  data: z.record(z.string(), z.unknown()).nullable().optional(),
  errors: z.array(GraphqlError).optional(),
});
export type GraphqlResponse = z.infer<typeof GraphqlResponse>;

/** vaultUpdated's event, as `agentctl watch vault` selects it. */
export const VaultUpdatedEvent = z.looseObject({
  address: z.string(),
  name: z.string(),
  tvl: z.string(),
  tvlUsd: z.number(),
  totalShares: z.string(),
  pricePerShare: z.string(),
  apy: z.looseObject({ current: z.number() }),
  /** The time of the block the state is at: the sandbox's addition to the spec's Vault. */
  updatedAt: z.string(),
});
export type VaultUpdatedEvent = z.infer<typeof VaultUpdatedEvent>;

/** transactionCreated's event, as `agentctl watch transactions` selects it. */
export const TransactionCreatedEvent = z.looseObject({
  hash: z.string(),
  type: z.string(),
  status: z.string(),
  amount: z.string(),
  shares: z.string().nullable(),
  user: z.string(),
  timestamp: z.string(),
  vault: z.looseObject({ address: z.string(), name: z.string() }),
});
export type TransactionCreatedEvent = z.infer<typeof TransactionCreatedEvent>;
