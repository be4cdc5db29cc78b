import { type Address, getAddress, parseEventLogs } from 'viem';
import { ConfigurableVault } from '../chain/contracts/artifacts.ts';
import type { ChainLogger } from '../chain/local-chain.ts';
import type { ServerWallet, TxRequest } from '../chain/wallets.ts';
import type { SandboxClock } from '../clock.ts';
import type { IndexCommit } from '../indexer/indexer.ts';
import { operatorReads } from '../indexer/operator-reads.ts';
import type { IndexView } from '../indexer/view.ts';
import type { Store } from '../store/index.ts';

/** How often due requests are looked for. */
const FULFIL_POLL_MS = 250;
/**
 * A log index past every log of a block: "seen the whole block". The index's log_index is a
 * 32-bit INTEGER on PostgreSQL, which refuses a larger parameter (Number.MAX_SAFE_INTEGER was).
 */
const PAST_EVERY_LOG = 2 ** 31 - 1;
/** After a failure, the next try waits this long (the chain may be restarting). */
const RETRY_MS = 5000;
/** Fixed gas: an estimate made before the vault's yield accrues can fall short. */
const FULFIL_GAS_BASE = 200_000n;
const FULFIL_GAS_PER_REQUEST = 150_000n;
const CLAIM_GAS = 250_000n;
/** At most this many requests per fulfilment transaction… */
const FULFIL_BATCH = 100;
/** …and this many fulfilment transactions per vault and look (one block holds them all). */
const FULFIL_TXS_PER_LOOK = 4;
/** The bounds of the fulfiller's work and memory. */
export interface FulfilmentLimits {
  /**
   * At most this many of the agents' own requests are followed apart from the rest (about
   * 150 bytes each); more (say, someone else's requests naming agents as controllers) are
   * fulfilled in time order with the others, and still claimed.
   */
  maxFollowed: number;
  /** At most this many newly indexed transactions are looked through per look. */
  scanPerLook: number;
}

export const FULFILMENT_LIMITS: FulfilmentLimits = { maxFollowed: 10_000, scanPerLook: 2000 };

export interface FulfillerOptions {
  /**
   * The index, read through its named queries (runtime.ts may swap the instance under it),
   * and told of its commits.
   */
  index: Pick<IndexView, 'read' | 'checkpoint'> & {
    onCommit(listener: (changes: IndexCommit) => void): () => void;
  };
  store: Store;
  clock: SandboxClock;
  /** The vaults' operator (the treasury holds OPERATOR_ROLE). */
  operator: ServerWallet;
  wallet(index: number): ServerWallet;
  log: ChainLogger;
  limits?: Partial<FulfilmentLimits>;
}

interface Followed {
  vault: string;
  requestId: string;
  /** When it was made (sandbox time): it is not looked up again before it can be due. */
  requestedAt: number;
}

interface Claim {
  controller: Address;
  vault: string;
  walletIndex: number;
}

/**
 * The ERC-7540 vault's operator, run by the sandbox. It fulfils every request, whoever made
 * it, once the vault's fulfilment delay has passed in sandbox time; then, for a controller
 * that is one of the sandbox's agents, it claims what was fulfilled from the agent's
 * server-side wallet (shares for a deposit, assets for a redemption). Anyone else claims for
 * themselves. It works from the index, and a transaction it sends is indexed before the next
 * look, so nothing is sent twice.
 *
 * Its work per look does not grow with history: due requests are found by time through an
 * index of pending requests, in batches; the agents' own requests are followed apart (found
 * as they are indexed) and go first, so someone else's queue of requests never holds them
 * up; and it claims only for agents whose request it saw fulfilled, never by scanning every
 * claimable position.
 */
export function createFulfiller(options: FulfillerOptions) {
  const { index, store, clock, log } = options;
  const limits = { ...FULFILMENT_LIMITS, ...options.limits };
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;
  let working: Promise<void> = Promise.resolve();
  let pausedUntil = 0;

  // The index is read through its named queries: no SQL against its tables here.
  const reads = operatorReads(index);

  /** The agents' requests not yet seen fulfilled, by `vault:id`. */
  const followed = new Map<string, Followed>();
  /** Agents with something fulfilled to claim, by `controller:vault`. */
  const claims = new Map<string, Claim>();
  /** The last transaction looked through for agents' requests, by its index key. */
  let seen = { block: 0, logIndex: 0 };

  const agentOf = async (user: string) => {
    const controller = getAddress(user);
    const agent = await store.agents.findByAgentAddress(controller);
    return agent && { controller, walletIndex: agent.wallet_index };
  };
  const follow = (row: { vault: string; request_id: string; timestamp: number | string }) => {
    if (followed.size < limits.maxFollowed) {
      followed.set(`${row.vault}:${row.request_id}`, {
        vault: row.vault,
        requestId: row.request_id,
        requestedAt: Number(row.timestamp),
      });
    }
  };
  const claimFor = async (user: string, vault: string) => {
    const agent = await agentOf(user);
    if (agent) claims.set(`${agent.controller}:${vault}`, { ...agent, vault });
  };

  /**
   * Once, at start: the agents' pending requests and unclaimed fulfilments already indexed
   * (the index was caught up before the fulfiller starts; later ones are found by takeNew).
   */
  async function seed(): Promise<void> {
    seen = { block: index.checkpoint()?.number ?? 0, logIndex: PAST_EVERY_LOG };
    const pending = await reads.pendingRequests();
    const claimable = await reads.claimablePositions();
    for (const row of pending) if (await agentOf(row.user_address)) follow(row);
    for (const row of claimable) await claimFor(row.user_address, row.vault);
  }

  /**
   * The agents' requests among the transactions indexed since the last look, at most
   * scanPerLook of them (the rest at the next look).
   */
  async function takeNew(): Promise<void> {
    const rows = await reads.indexedAfter(seen.block, seen.logIndex, limits.scanPerLook);
    for (const row of rows) {
      const { request_id: requestId } = row;
      if (requestId && row.status === 'pending' && (await agentOf(row.user_address))) {
        follow({ ...row, request_id: requestId });
      }
    }
    const last = rows.at(-1);
    if (last) seen = { block: Number(last.block_number), logIndex: Number(last.log_index) };
  }

  /** The followed requests of `vault` that are due; those no longer pending stop being followed. */
  async function followedDue(vault: string, dueBy: number): Promise<bigint[]> {
    const ids: bigint[] = [];
    const candidates = [...followed].filter(
      ([, entry]) => entry.vault === vault && entry.requestedAt <= dueBy,
    );
    if (candidates.length === 0) return ids;
    // Their rows in one read, rather than one each.
    const rows = await reads.requests(
      vault,
      candidates.map(([, entry]) => entry.requestId),
    );
    for (const [key, entry] of candidates) {
      const row = rows.get(entry.requestId);
      if (row?.status === 'pending') {
        if (Number(row.timestamp) <= dueBy) ids.push(BigInt(entry.requestId));
        continue;
      }
      // Fulfilled by someone else (the operator's key is public), or gone with a reorg.
      if (row?.status === 'fulfilled') await claimFor(row.user_address, vault);
      followed.delete(key);
    }
    return ids;
  }

  async function fulfilDue(): Promise<void> {
    const now = clock.nowSeconds();
    const vaults = await reads.vaultDelays();
    for (const { address: vault, fulfillment_delay: delay } of vaults) {
      const dueBy = now - Number(delay);
      const limit = FULFIL_BATCH * FULFIL_TXS_PER_LOOK;
      const ids = [
        ...new Set([...(await followedDue(vault, dueBy)), ...(await dueIds(vault, dueBy, limit))]),
      ];
      if (ids.length === 0) continue;
      const batches: bigint[][] = [];
      for (let i = 0; i < Math.min(ids.length, limit); i += FULFIL_BATCH) {
        batches.push(ids.slice(i, i + FULFIL_BATCH));
      }
      const { receipts } = await options.operator.exclusive((session) =>
        session.send(
          batches.map((batch) => ({
            label: `fulfilling ${batch.length} request(s)`,
            address: getAddress(vault),
            abi: ConfigurableVault.abi,
            functionName: 'fulfill',
            args: [batch],
            gas: FULFIL_GAS_BASE + FULFIL_GAS_PER_REQUEST * BigInt(batch.length),
          })),
        ),
      );
      const fulfilled = parseEventLogs({
        abi: ConfigurableVault.abi,
        eventName: ['DepositFulfilled', 'RedeemFulfilled'],
        logs: receipts.flatMap((receipt) => receipt.logs),
      });
      for (const event of fulfilled) {
        await claimFor(event.args.controller, vault);
        followed.delete(`${vault}:${event.args.requestId}`);
      }
      // The vault skips an id that is not due onchain (say, its delay was raised since): it
      // stays pending, and is looked at again after a pause rather than at every poll.
      const sent = batches.reduce((sum, batch) => sum + batch.length, 0);
      if (fulfilled.length < sent) {
        pausedUntil = Date.now() + RETRY_MS;
        log.warn(
          `${sent - fulfilled.length} ERC-7540 request(s) were not due onchain yet; looking again in ${RETRY_MS / 1000} s`,
        );
      }
    }
  }

  async function dueIds(vault: string, dueBy: number, limit: number): Promise<bigint[]> {
    return (await reads.dueRequestIds(vault, dueBy, limit)).map((id) => BigInt(id));
  }

  /**
   * Claims for every agent with something fulfilled, all at once: the agents' wallets are
   * their own, so their claims share blocks. A failed claim is kept for the next look.
   */
  async function claimForAgents(): Promise<void> {
    const outcomes = await Promise.allSettled(
      [...claims].map(async ([key, claim]) => {
        await claimOne(claim);
        // Claimed, or nothing left to claim.
        claims.delete(key);
      }),
    );
    const failed = outcomes.find((outcome) => outcome.status === 'rejected');
    if (failed) throw failed.reason;
  }

  async function claimOne(claim: Claim): Promise<void> {
    const row = await reads.claimable(claim.controller.toLowerCase(), claim.vault);
    const vault = getAddress(claim.vault);
    const { controller } = claim;
    const requests: TxRequest[] = [];
    if (row && BigInt(row.claimable_deposit) > 0n) {
      requests.push({
        label: 'claiming deposited shares',
        address: vault,
        abi: ConfigurableVault.abi,
        functionName: 'deposit',
        args: [BigInt(row.claimable_deposit), controller, controller],
        gas: CLAIM_GAS,
      });
    }
    if (row && BigInt(row.claimable_redeem) > 0n) {
      requests.push({
        label: 'claiming redeemed assets',
        address: vault,
        abi: ConfigurableVault.abi,
        functionName: 'redeem',
        args: [BigInt(row.claimable_redeem), controller, controller],
        gas: CLAIM_GAS,
      });
    }
    if (requests.length > 0) {
      await options.wallet(claim.walletIndex).exclusive((session) => session.send(requests));
    }
  }

  async function work(): Promise<void> {
    if (stopped || Date.now() < pausedUntil) return;
    try {
      await takeNew();
      await fulfilDue();
      if (!stopped) await claimForAgents();
    } catch (error) {
      pausedUntil = Date.now() + RETRY_MS;
      log.warn(
        `fulfilling ERC-7540 requests failed: ${(error as Error).message}; trying again in ${RETRY_MS / 1000} s`,
      );
    }
  }

  /** Looks for due requests and claims now (also run every FULFIL_POLL_MS). */
  function run(): Promise<void> {
    working = working.then(work);
    return working;
  }

  let unsubscribe: (() => void) | undefined;
  return {
    run,
    start(): void {
      // The requests already indexed, read now; the agents they belong to are looked up
      // before the first look for due requests.
      const seeding = seed();
      working = working
        .then(() => seeding)
        .catch((error: unknown) =>
          log.warn(`reading the agents' pending requests failed: ${(error as Error).message}`),
        );
      unsubscribe = index.onCommit((changes) => {
        // A reorg cut the index back: what is indexed again after the new head is new.
        const head = index.checkpoint()?.number ?? 0;
        if (changes.reorg && head < seen.block) seen = { block: head, logIndex: PAST_EVERY_LOG };
      });
      const tick = () => {
        timer = setTimeout(() => void run().then(tick), FULFIL_POLL_MS);
        timer.unref();
      };
      tick();
    },
    async stop(): Promise<void> {
      stopped = true;
      unsubscribe?.();
      clearTimeout(timer);
      await working;
    },
  };
}
export type Fulfiller = ReturnType<typeof createFulfiller>;
