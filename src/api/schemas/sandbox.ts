import { z } from 'zod';
import {
  Address,
  boundedInt,
  decimalAmount,
  nameText,
  Tier,
  textUpTo,
  withNameRules,
} from './common.ts';
import { STRATEGY_STATUSES, VAULT_IDS } from './values.ts';
import { USDC_DECIMALS } from './vaults.ts';

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

/** Where the protocol's contracts are; also the format of `serve --deployment FILE`. */
export const ContractAddresses = z.object({
  usdc: Address,
  protocol_token: Address,
  strategy_registry: Address,
  governor: Address,
  agent_pass: Address,
  agent_onboarding: Address,
  vaults: z.object(
    Object.fromEntries(VAULT_IDS.map((id) => [id, Address])) as Record<
      (typeof VAULT_IDS)[number],
      typeof Address
    >,
  ),
  /**
   * The block the contracts were deployed in, where the data API's index starts. Optional in a
   * --deployment file: without it the block is found on the chain (its code's first block).
   */
  deployed_block: z.number().int().min(0).optional(),
});
export type ContractAddresses = z.infer<typeof ContractAddresses>;

/**
 * The chain's warm standby (a second anvil that mines every logged block again, promoted when
 * the first one dies): `following` the log, at `block_number`; `starting` (from the checkpoint
 * or a copy of the chain); or `none` (no block logged yet, after a failure until the next try, or with
 * --rpc-url).
 */
export const StandbyStatus = z.object({
  status: z.enum(['none', 'starting', 'following']),
  block_number: z.number().int().nullable(),
});
export type StandbyStatus = z.infer<typeof StandbyStatus>;

/**
 * What a `serve` is in a team sandbox: the `writer` (the one that runs the chain and takes
 * writes; a sandbox on SQLite has only it) or a `replica` (reads from the database, forwards
 * writes to the writer).
 */
export const SandboxRole = z.enum(['writer', 'replica']);
export type SandboxRole = z.infer<typeof SandboxRole>;

/** Where the sandbox's state is: SQLite files in the state dir, or a PostgreSQL database. */
export const SandboxDatabase = z.enum(['sqlite', 'postgres']);
export type SandboxDatabase = z.infer<typeof SandboxDatabase>;

export const SandboxInfo = z.object({
  version: z.string(),
  role: SandboxRole,
  database: SandboxDatabase,
  chain_id: z.number().int(),
  rpc_url: z.string(),
  contracts: ContractAddresses,
  clock: ClockState,
  state_dir: z.string(),
  persistent: z.boolean(),
  rate_limit: z.boolean(),
  /**
   * The data API's index: its last block, and how long the service's writes waited to be
   * indexed before they were answered (median and p99 of the last 1024, in ms).
   */
  index: z.object({
    block_number: z.number().int(),
    writes_indexed: z.number().int(),
    write_wait_ms_p50: z.number().nullable(),
    write_wait_ms_p99: z.number().nullable(),
  }),
  standby: StandbyStatus,
  /**
   * GraphQL subscriptions: open WebSockets and subscriptions, the distinct ones among them
   * (same topic, document and variables: each event is executed once for them), events sent
   * to subscribers so far, and sockets dropped for not reading what they are sent.
   */
  graphql: z.object({
    sockets: z.number().int(),
    subscriptions: z.number().int(),
    distinct_subscriptions: z.number().int(),
    events_sent: z.number().int(),
    dropped: z.number().int(),
  }),
});
export type SandboxInfo = z.infer<typeof SandboxInfo>;

/** POST /sandbox/checkpoint: the chain is on disk up to this block; the log holds the rest. */
export const CheckpointResult = z.object({ block_number: z.number().int() });

/** Largest amounts one POST /sandbox/fund may add. */
export const MAX_FUND_USDC = 1_000_000_000;
export const MAX_FUND_ETH = 1000;
const ETH_DECIMALS = 18;

export const FundRequest = z
  .object({
    address: Address,
    usdc: decimalAmount(USDC_DECIMALS, MAX_FUND_USDC).optional(),
    eth: decimalAmount(ETH_DECIMALS, MAX_FUND_ETH).optional(),
  })
  .refine((body) => body.usdc !== undefined || body.eth !== undefined, {
    error: 'give usdc, eth or both',
  });
export const FundResult = z.object({
  address: z.string(),
  usdc_tx: z.string().nullable(),
  eth_tx: z.string().nullable(),
  usdc_balance_raw: z.string(),
  eth_balance_wei: z.string(),
});

export const CreateProposalRequest = z.object({
  title: withNameRules(
    z
      .string()
      .trim()
      .min(1, { error: 'must not be empty', abort: true })
      .max(200, { error: 'must be at most 200 characters', abort: true }),
  ),
  description: textUpTo(5000).default(''),
});
export const CreateProposalResult = z.object({
  proposal_id: z.number().int(),
  tx_hash: z.string(),
  vote_end: z.number().int(),
});

export const StrategyStatusRequest = z.object({
  strategy_id: z.string().regex(/^0x[0-9a-fA-F]{64}$/, { error: 'must be 0x plus 64 hex digits' }),
  status: z.enum(STRATEGY_STATUSES, { error: `must be one of ${STRATEGY_STATUSES.join(', ')}` }),
});
export const StrategyStatusResult = z.object({
  strategy_id: z.string(),
  previous_status: z.enum(STRATEGY_STATUSES),
  status: z.enum(STRATEGY_STATUSES),
  tx_hash: z.string(),
});

/** POST /sandbox/vaults/fulfillment-delay: the ERC-7540 vault's fulfilment delay, in seconds. */
export const FulfillmentDelayRequest = z.object({
  vault_id: z.enum(VAULT_IDS, { error: `must be one of ${VAULT_IDS.join(', ')}` }),
  seconds: boundedInt(0, MAX_CLOCK_ADVANCE_SECONDS),
});
export const FulfillmentDelayResult = z.object({
  vault_id: z.string(),
  vault_address: z.string(),
  fulfillment_delay: z.number().int(),
  tx_hash: z.string(),
});

/** POST /sandbox/nodes: a node for the data API's Node Operator tier. */
export const NodeRequest = z.object({
  name: nameText(1, 100),
  operator_address: Address,
});
/** The node key is shown once; only its hash is stored. */
export const NodeResult = z.object({ node_id: z.string(), node_key: z.string() });

/** A snapshot's name: what `POST /sandbox/snapshots` takes and every path under it names. */
export const SNAPSHOT_NAME_PATTERN = /^[A-Za-z0-9._-]{1,64}$/;
export const SnapshotName = z
  .string()
  .regex(SNAPSHOT_NAME_PATTERN, { error: 'must be 1 to 64 of A-Z a-z 0-9 . _ -' })
  .refine((name) => name !== '.' && name !== '..', { error: 'must not be . or ..' });
/** The snapshot that always exists: restoring it resets the sandbox to a new, empty one. */
export const GENESIS_SNAPSHOT = 'genesis';
/** Most snapshots one sandbox keeps (genesis not counted); one more is refused with 409. */
export const MAX_SNAPSHOTS = 100;

/** POST /sandbox/snapshots: `replace` lets an existing snapshot of that name be taken again. */
export const SnapshotRequest = z.object({
  name: SnapshotName,
  replace: z.boolean().optional(),
});
export type SnapshotRequest = z.infer<typeof SnapshotRequest>;

/** One snapshot: the block it holds the chain at, when it was taken, and its size on disk. */
export const SnapshotInfo = z.object({
  name: z.string(),
  block_number: z.number().int(),
  /** ISO 8601, sandbox time. */
  created_at: z.string(),
  size_bytes: z.number().int(),
});
export type SnapshotInfo = z.infer<typeof SnapshotInfo>;

export const SnapshotList = z.object({ snapshots: z.array(SnapshotInfo) });
export type SnapshotList = z.infer<typeof SnapshotList>;

/** POST /sandbox/snapshots/NAME/restore. */
export const RestoreResult = z.object({
  name: z.string(),
  block_number: z.number().int(),
  restored_in_ms: z.number(),
});
export type RestoreResult = z.infer<typeof RestoreResult>;

/** DELETE /sandbox/snapshots/NAME. */
export const SnapshotDeleted = z.object({ name: z.string(), deleted: z.literal(true) });
export type SnapshotDeleted = z.infer<typeof SnapshotDeleted>;

/**
 * The GraphQL WebSocket close code sent to every subscriber when the sandbox is restored to a
 * snapshot: what they were told no longer holds; subscribe again.
 */
export const CLOSE_SANDBOX_RESTORED = 4205;

/** The exported file's format: `agentctl serve --from FILE` refuses any other. */
export const SANDBOX_EXPORT_FORMAT = 1;
