import {
  type Address,
  decodeEventLog,
  type Hash,
  type Hex,
  keccak256,
  type TransactionReceipt,
  toHex,
} from 'viem';
import { STRATEGY_STATUSES } from '../../api/schemas/index.ts';
import { HttpError } from '../errors.ts';
import type { StoreTx } from '../store/index.ts';
import { StrategyRegistryV3 } from './contracts/artifacts.ts';
import { revertReason } from './errors.ts';
import type { SandboxChain } from './index.ts';

export type StrategyStatus = (typeof STRATEGY_STATUSES)[number];

export interface RiskParams {
  max_position_size_percent: number;
  max_leverage: number;
  stop_loss_percent: number;
  slippage_tolerance_bps: number;
  correlation_threshold: number;
  velocity_limit: number;
  flash_loans_enabled: boolean;
}

/** What the DNA of a submission without one is derived from. */
export interface DnaSeed {
  name: string;
  agentId: string;
  /** The agent's server-side wallet, which owns the strategy onchain. */
  wallet: Address;
  timestamp: number;
  /** How many strategies the wallet owned before this one: its index in the registry. */
  sequence: bigint;
}

/**
 * The DNA used when a submission has none: keccak256 of name, agent id, wallet, timestamp
 * and sequence, one per line. Name, wallet and timestamp alone (the spec's words) repeat
 * when an agent submits one name twice in a second; the sequence never repeats for a wallet,
 * since it is read while the wallet is held for this submission. Every input is one the
 * agent can know (agent_id from registration, the strategy count), so it can recompute it.
 */
export function deriveDna(seed: DnaSeed): Hex {
  const { name, agentId, wallet, timestamp, sequence } = seed;
  return keccak256(toHex([name, agentId, wallet.toLowerCase(), timestamp, sequence].join('\n')));
}

/**
 * Submits from the agent's server-side wallet and returns what the receipt says. `dna` is
 * the client's, or derived from the submission's sequence (see deriveDna).
 */
export async function submitStrategy(
  chain: SandboxChain,
  walletIndex: number,
  strategy: {
    name: string;
    description: string;
    dna: Hex | ((sequence: bigint) => Hex);
    risk: RiskParams;
  },
  record: (tx: StoreTx, submitted: SubmittedStrategy) => Promise<void>,
): Promise<SubmittedStrategy> {
  const registry = chain.deployment.strategy_registry;
  const { risk } = strategy;
  return chain.wallet(walletIndex).exclusive(async (session) => {
    const dna =
      typeof strategy.dna === 'string'
        ? strategy.dna
        : strategy.dna(await strategyCountOf(chain, session.address));
    const sent = await session.send(
      [
        {
          label: 'strategy submission',
          address: registry,
          abi: StrategyRegistryV3.abi,
          functionName: 'submit',
          args: [
            dna,
            strategy.name,
            strategy.description,
            {
              maxPositionSizePercent: BigInt(risk.max_position_size_percent),
              maxLeverage: BigInt(risk.max_leverage),
              stopLossPercent: BigInt(risk.stop_loss_percent),
              slippageToleranceBps: BigInt(risk.slippage_tolerance_bps),
              correlationThreshold: BigInt(risk.correlation_threshold),
              velocityLimit: BigInt(risk.velocity_limit),
              flashLoansEnabled: risk.flash_loans_enabled,
            },
          ],
        },
      ],
      async (tx, [receipt]) => {
        const submitted = submittedFrom(registry, dna, receipt as TransactionReceipt);
        await record(tx, submitted);
        return submitted;
      },
    );
    return sent.recorded;
  });
}

/** A strategy submitted, as its answer tells it. */
export interface SubmittedStrategy {
  dna: Hex;
  strategyId: Hex;
  txHash: Hash;
  blockNumber: number;
  gasUsed: number;
}

function submittedFrom(
  registry: Address,
  dna: Hex,
  receipt: TransactionReceipt,
): SubmittedStrategy {
  const submitted = receipt.logs
    .filter((log) => log.address.toLowerCase() === registry.toLowerCase())
    .map((log) => decodeEventLog({ abi: StrategyRegistryV3.abi, ...log, strict: false }))
    .find((event) => event.eventName === 'StrategySubmitted');
  if (submitted?.eventName !== 'StrategySubmitted' || !submitted.args.strategyId) {
    throw new HttpError(
      502,
      'the registry confirmed the submission but emitted no StrategySubmitted',
    );
  }
  return {
    dna,
    strategyId: submitted.args.strategyId,
    txHash: receipt.transactionHash,
    blockNumber: Number(receipt.blockNumber),
    gasUsed: Number(receipt.gasUsed),
  };
}

/** The owner's strategies, enumerated from the registry. */
export async function strategiesOf(chain: SandboxChain, owner: Address) {
  const { publicClient } = chain;
  const registry = chain.deployment.strategy_registry;
  const ids = await publicClient.readContract({
    address: registry,
    abi: StrategyRegistryV3.abi,
    functionName: 'strategiesOf',
    args: [owner],
  });
  return Promise.all(
    ids.map(async (id) => {
      const strategy = await publicClient.readContract({
        address: registry,
        abi: StrategyRegistryV3.abi,
        functionName: 'getStrategy',
        args: [id],
      });
      return {
        strategy_id: id,
        name: strategy.name,
        description: strategy.description,
        status: STRATEGY_STATUSES[strategy.status] ?? 'unknown',
        created_at: Number(strategy.createdAt),
        last_status_change: Number(strategy.lastStatusChange),
        strategy_contract: registry,
      };
    }),
  );
}

export function strategyCountOf(chain: SandboxChain, owner: Address): Promise<bigint> {
  return chain.publicClient.readContract({
    address: chain.deployment.strategy_registry,
    abi: StrategyRegistryV3.abi,
    functionName: 'strategyCountOf',
    args: [owner],
  });
}

export function totalStrategies(chain: SandboxChain): Promise<bigint> {
  return chain.publicClient.readContract({
    address: chain.deployment.strategy_registry,
    abi: StrategyRegistryV3.abi,
    functionName: 'totalStrategies',
  });
}

/**
 * Moves a strategy along its lifecycle (sandbox admin). The registry enforces the rules;
 * they are checked first so an illegal move is a 400 and sends nothing.
 */
export async function setStrategyStatus(
  chain: SandboxChain,
  strategyId: Hex,
  to: StrategyStatus,
  record: (
    tx: StoreTx,
    moved: { from: StrategyStatus; txHash: Hash },
  ) => Promise<void> = async () => {},
) {
  const registry = chain.deployment.strategy_registry;
  // The check and the send share the treasury's lock, so two concurrent moves of one
  // strategy cannot both pass the check.
  const moved = await chain.treasury.exclusive(async (session) => {
    let current: { status: number; pausedFrom: number };
    try {
      current = await chain.publicClient.readContract({
        address: registry,
        abi: StrategyRegistryV3.abi,
        functionName: 'getStrategy',
        args: [strategyId],
      });
    } catch (error) {
      if (revertReason(error).startsWith('UnknownStrategy')) {
        throw new HttpError(404, `no strategy ${strategyId}`);
      }
      throw error;
    }
    const target = STRATEGY_STATUSES.indexOf(to);
    const from = STRATEGY_STATUSES[current.status] as StrategyStatus;
    const legal = await chain.publicClient.readContract({
      address: registry,
      abi: StrategyRegistryV3.abi,
      functionName: 'canTransition',
      args: [current.status, target, current.pausedFrom],
    });
    if (!legal) {
      throw new HttpError(
        400,
        `a strategy cannot move from ${from} to ${to}${legalMovesHint(from)}`,
      );
    }
    const { recorded } = await session.send(
      [
        {
          label: 'status change',
          address: registry,
          abi: StrategyRegistryV3.abi,
          functionName: 'setStatus',
          args: [strategyId, target],
        },
      ],
      async (tx, [receipt]) => {
        const moved = { from, txHash: (receipt as TransactionReceipt).transactionHash };
        await record(tx, moved);
        return moved;
      },
    );
    return recorded;
  });
  return moved;
}

function legalMovesHint(from: StrategyStatus): string {
  if (from === 'deprecated') return ': deprecated is terminal';
  if (from === 'paused')
    return ': a paused strategy resumes to the state it was paused from, or is deprecated';
  const next = STRATEGY_STATUSES[STRATEGY_STATUSES.indexOf(from) + 1];
  const moves = [from === 'live' ? undefined : next, 'paused', 'deprecated'].filter(Boolean);
  return `; from ${from} it may move to ${moves.join(', ')}`;
}
