/**
 * The contract's enums and limits as plain values, with no imports: the CLI's option help
 * (loaded for every `--help`) names them without loading zod. The schemas build on these.
 */

/** The six vault identifiers that deposit accepts. */
export const VAULT_IDS = [
  'conservative',
  'moderate',
  'aggressive',
  'inverse',
  'hedged',
  'configurable',
] as const;

export const AGENT_TYPES = [
  'trading',
  'governance',
  'analytics',
  'custom',
  'quant',
  'cfo',
  'research',
] as const;

/** Agent tiers, lowest first. The order is the permission order. */
export const TIERS = [
  'unverified',
  'observer',
  'registered',
  'established',
  'core_contributor',
] as const;

/** Strategy lifecycle states, in pipeline order; paused and deprecated are off to the side. */
export const STRATEGY_STATUSES = [
  'shadow',
  'guardian_review',
  'paper_trading',
  'pending_oracle_approval',
  'live',
  'paused',
  'deprecated',
] as const;

/** Vote support values, as in OpenZeppelin's Governor. */
export const VOTE_SUPPORT = { against: 0, for: 1, abstain: 2 } as const;

export const LEADERBOARD_DEFAULT_LIMIT = 50;
export const LEADERBOARD_MAX_LIMIT = 100;
