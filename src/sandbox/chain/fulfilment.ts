import { type Address, getAddress, parseEventLogs } from 'viem';
import type { SandboxClock } from '../clock.ts';
import type { Indexer } from '../indexer/indexer.ts';
import { statement } from '../indexer/statements.ts';
import type { Store } from '../store/index.ts';
import { ConfigurableVault } from './contracts/artifacts.ts';
import type { ChainLogger } from './local-chain.ts';
import type { ServerWallet, TxRequest } from './wallets.ts';

/** How often due requests are looked for. */
const FULFIL_POLL_MS = 250;
/** After a failure, the next try waits this long (the chain may be restarting). */
const RETRY_MS = 5000;
/** Fixed gas: an estimate made before the vault's yield accrues can fall short. */
const FULFIL_GAS_BASE = 200_000n;
const FULFIL_GAS_PER_REQUEST = 150_000n;
const CLAIM_GAS = 250_000n;
/** At most this many requests per fulfilment transaction. */
const FULFIL_BATCH = 50;

export interface FulfillerOptions {
  index: Indexer;
  store: Store;
  clock: SandboxClock;
  /** The vaults' operator (the treasury holds OPERATOR_ROLE). */
  operator: ServerWallet;
  wallet(index: number): ServerWallet;
  log: ChainLogger;
}

/**
 * The ERC-7540 vault's operator, run by the sandbox. It fulfils every request, whoever made
 * it, once the vault's fulfilment delay has passed in sandbox time; then, for a controller
 * that is one of the sandbox's agents, it claims what was fulfilled from the agent's
 * server-side wallet (shares for a deposit, assets for a redemption). Anyone else claims for
 * themselves. It works from the index, and a transaction it sends is indexed before the next
 * look, so nothing is sent twice.
 */
export function createFulfiller(options: FulfillerOptions) {
  const { index, store, clock, log } = options;
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;
  let working: Promise<void> = Promise.resolve();
  let pausedUntil = 0;

  // Prepared per database by statement(), and read through index.read(): a failed index.db is
  // replaced by a rebuilt one, whose statements are its own.
  const dueRequests = () =>
    statement(
      index.db,
      `SELECT t.vault, t.request_id FROM transactions t JOIN vaults v ON v.address = t.vault
     WHERE t.status = 'pending' AND t.type IN ('deposit_request', 'redeem_request')
       AND v.fulfillment_delay IS NOT NULL AND t.timestamp + v.fulfillment_delay <= ?
     ORDER BY t.block_number, t.log_index`,
    );
  const claimable = () =>
    statement(
      index.db,
      `SELECT user_address, vault, claimable_deposit, claimable_redeem FROM positions
     WHERE claimable_deposit <> '0' OR claimable_redeem <> '0'`,
    );

  async function fulfilDue(): Promise<void> {
    const due = index.read(() => dueRequests().all(clock.nowSeconds())) as Array<{
      vault: string;
      request_id: string;
    }>;
    const byVault = new Map<string, bigint[]>();
    for (const row of due) {
      const ids = byVault.get(row.vault) ?? [];
      if (ids.length < FULFIL_BATCH) ids.push(BigInt(row.request_id));
      byVault.set(row.vault, ids);
    }
    for (const [vault, ids] of byVault) {
      const { receipts } = await options.operator.exclusive((session) =>
        session.send([
          {
            label: `fulfilling ${ids.length} request(s)`,
            address: getAddress(vault),
            abi: ConfigurableVault.abi,
            functionName: 'fulfill',
            args: [ids],
            gas: FULFIL_GAS_BASE + FULFIL_GAS_PER_REQUEST * BigInt(ids.length),
          },
        ]),
      );
      // The vault skips an id that is not due onchain (say, its delay was raised since): it
      // stays pending, and is looked at again after a pause rather than at every poll.
      const fulfilled = parseEventLogs({
        abi: ConfigurableVault.abi,
        eventName: ['DepositFulfilled', 'RedeemFulfilled'],
        logs: receipts[0]?.logs ?? [],
      }).length;
      if (fulfilled < ids.length) {
        pausedUntil = Date.now() + RETRY_MS;
        log.warn(
          `${ids.length - fulfilled} ERC-7540 request(s) were not due onchain yet; looking again in ${RETRY_MS / 1000} s`,
        );
      }
    }
  }

  async function claimForAgents(): Promise<void> {
    const rows = index.read(() => claimable().all()) as Array<{
      user_address: string;
      vault: string;
      claimable_deposit: string;
      claimable_redeem: string;
    }>;
    for (const row of rows) {
      const controller = getAddress(row.user_address);
      const agent = store.agents.findByAgentAddress(controller);
      if (!agent) continue;
      const vault = getAddress(row.vault) as Address;
      const claims: TxRequest[] = [];
      if (BigInt(row.claimable_deposit) > 0n) {
        claims.push({
          label: 'claiming deposited shares',
          address: vault,
          abi: ConfigurableVault.abi,
          functionName: 'deposit',
          args: [BigInt(row.claimable_deposit), controller, controller],
          gas: CLAIM_GAS,
        });
      }
      if (BigInt(row.claimable_redeem) > 0n) {
        claims.push({
          label: 'claiming redeemed assets',
          address: vault,
          abi: ConfigurableVault.abi,
          functionName: 'redeem',
          args: [BigInt(row.claimable_redeem), controller, controller],
          gas: CLAIM_GAS,
        });
      }
      await options.wallet(agent.wallet_index).exclusive((session) => session.send(claims));
    }
  }

  async function work(): Promise<void> {
    if (stopped || Date.now() < pausedUntil) return;
    try {
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

  return {
    run,
    start(): void {
      const tick = () => {
        timer = setTimeout(() => void run().then(tick), FULFIL_POLL_MS);
        timer.unref();
      };
      tick();
    },
    async stop(): Promise<void> {
      stopped = true;
      clearTimeout(timer);
      await working;
    },
  };
}
export type Fulfiller = ReturnType<typeof createFulfiller>;
