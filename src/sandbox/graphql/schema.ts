import {
  GRAPHQL_ENUMS,
  GRAPHQL_INTERVALS,
  GRAPHQL_LIMITS,
  GRAPHQL_PERIODS,
} from '../../api/schemas/index.ts';

/**
 * The data API's GraphQL schema (Part B of the spec), as SDL. Its enums come from the shared
 * schemas (src/api/schemas/graphql.ts), so REST and GraphQL take the same values. The spec's
 * types keep exactly its field names and nullability; ProtocolStats, NodeStats and Node are
 * ours, with /v1/protocol/stats's and /v1/nodes's fields. `npm run build:schema` prints it to
 * schema.graphql, and a test fails when the two differ.
 */

const enumType = (name: string, values: readonly string[], description: string) =>
  `"""${description}"""\nenum ${name} {\n${values.map((value) => `  ${value}`).join('\n')}\n}`;

export const SCHEMA_SDL = `"""
An integer of any size, such as an amount in raw units (USDC has 6 decimals). Answered as a
decimal string; accepted as a decimal string or an integer.
"""
scalar BigInt

"""An instant as ISO 8601 in UTC, such as 2026-11-22T10:00:00Z."""
scalar DateTime

${enumType('RiskLevel', GRAPHQL_ENUMS.RiskLevel, "A vault's risk level.")}

${enumType('StrategyStatus', GRAPHQL_ENUMS.StrategyStatus, "A strategy's stage: Part A's lifecycle mapped as in docs/data-api.md.")}

${enumType('TransactionType', GRAPHQL_ENUMS.TransactionType, 'What a vault transaction did.')}

${enumType('TransactionStatus', GRAPHQL_ENUMS.TransactionStatus, 'Where a vault transaction is: requests go PENDING, FULFILLED, CLAIMED; a reverted call is FAILED.')}

${enumType('Period', Object.keys(GRAPHQL_PERIODS), 'How far back a history goes: 7, 30, 90 or 365 days, or since the vault was created.')}

${enumType('Interval', Object.keys(GRAPHQL_INTERVALS), "A history's step: 1 hour, 4 hours, 1 day or 1 week, aligned to the Unix epoch.")}

${enumType('VaultOrderBy', GRAPHQL_ENUMS.VaultOrderBy, 'The order of a vault list.')}

${enumType('NodeStatus', GRAPHQL_ENUMS.NodeStatus, "Whether a node answers (the sandbox's own) or used its key in the last 5 minutes.")}

"""Yield rates in percent a year (4.0 is 4 %), as /v1 answers them."""
type APY {
  "The vault's rate now."
  current: Float!
  "The share price's growth over the last 7 days, annualised."
  day7: Float!
  "The share price's growth over the last 30 days, annualised."
  day30: Float!
  "The share price's growth since the vault was created, annualised."
  inception: Float!
}

"""Fees in percent. The sandbox's vaults charge none."""
type Fees {
  management: Float!
  performance: Float!
  hurdle: Float!
}

"""A vault at the last indexed block."""
type Vault {
  address: String!
  name: String!
  symbol: String!
  "Assets under management, in raw units of the asset (USDC)."
  tvl: BigInt!
  tvlUsd: Float!
  totalShares: BigInt!
  "What one whole share (10^6 raw units) is worth, in raw units of the asset."
  pricePerShare: BigInt!
  apy: APY!
  fees: Fees!
  riskLevel: RiskLevel!
  "The live strategies that trade for this vault."
  strategies: [Strategy!]!
  "Whether deposits and redemptions are asynchronous requests (ERC-7540)."
  isERC7540: Boolean!
  "Seconds before a request can be fulfilled; null on a synchronous vault."
  fulfillmentDelay: Int
  createdAt: DateTime!
  "The time of the block this state is at (the last indexed one). Not in the spec: ours, so that vaultUpdated's events carry their block's time."
  updatedAt: DateTime!
}

"""A strategy with its simulated performance."""
type Strategy {
  id: ID!
  name: String!
  status: StrategyStatus!
  "Its share of its vault: 1 / (live strategies in that vault); 0 when not live."
  allocation: Float!
  apy: Float!
  riskScore: Int!
  sharpeRatio: Float!
  maxDrawdown: Float!
}

"""One user's position in one vault."""
type UserPosition {
  vault: Vault!
  shares: BigInt!
  "What the shares are worth now, in raw units of the asset."
  value: BigInt!
  "Value less net deposits, in raw units; negative on a loss."
  pnl: BigInt!
  pnlPercent: Float!
  "The first deposit (or, for a position that is only a pending request, the first request)."
  depositedAt: DateTime!
}

"""A vault transaction: a deposit, a withdrawal, an ERC-7540 request or claim, or a reverted call."""
type Transaction {
  hash: String!
  type: TransactionType!
  vault: Vault!
  user: String!
  "Assets in raw units (a redemption request's are known once it is fulfilled)."
  amount: BigInt!
  shares: BigInt
  status: TransactionStatus!
  timestamp: DateTime!
}

"""A vault's state at the end of one interval of its history."""
type VaultSnapshot {
  timestamp: DateTime!
  tvl: BigInt!
  "The share price's growth over this interval, annualised."
  apy: Float!
  pricePerShare: BigInt!
}

"""The protocol as a whole, as GET /v1/protocol/stats answers it."""
type ProtocolStats {
  totalTvl: BigInt!
  totalTvlUsd: Float!
  vaults: Int!
  strategies: Int!
  liveStrategies: Int!
  agents: Int!
  "Addresses with any indexed vault transaction."
  users: Int!
  transactions: Int!
  "Assets moved by deposits, withdrawals and claims in the last 24 hours, in raw units."
  volume24h: BigInt!
  blockNumber: Int!
  updatedAt: DateTime!
}

"""A chain node, as GET /v1/nodes lists it."""
type Node {
  id: ID!
  name: String!
  operator: String!
  status: NodeStatus!
  blockNumber: Int
  lastSeen: DateTime
  latencyMs: Float
  version: String
}

"""The nodes, counted, with the highest block any of them reports."""
type NodeStats {
  total: Int!
  online: Int!
  offline: Int!
  latestBlock: Int
  nodes: [Node!]!
}

type Query {
  "Every vault, filtered by risk level and minimum TVL (raw units), in the order asked."
  vaults(riskLevel: RiskLevel, minTvl: BigInt, orderBy: VaultOrderBy): [Vault!]!
  "One vault; null with a NOT_FOUND error when there is none at the address."
  vault(address: String!): Vault
  "A vault's TVL and APY, one snapshot per interval, oldest first; the last is now."
  vaultHistory(address: String!, period: Period!, interval: Interval!): [VaultSnapshot!]!
  "The strategies that are not deprecated, filtered by status and minimum Sharpe ratio."
  strategies(status: StrategyStatus, minSharpe: Float): [Strategy!]!
  "One strategy; null with a NOT_FOUND error when there is none."
  strategy(id: ID!): Strategy
  "A user's open positions, one per vault."
  userPositions(address: String!): [UserPosition!]!
  "A user's transactions, newest first: limit (default 50, at most ${GRAPHQL_LIMITS.maxLimit}) from offset."
  userTransactions(address: String!, type: TransactionType, limit: Int, offset: Int): [Transaction!]!
  protocolStats: ProtocolStats!
  nodeStats: NodeStats!
}

type Subscription {
  "The vault after every indexed block that changes it (deposits, withdrawals, fulfilments, accruals)."
  vaultUpdated(address: String!): Vault!
  "Every vault transaction as it is indexed; only one vault's when vaultAddress is given."
  transactionCreated(vaultAddress: String): Transaction!
}
`;
