import type { Address } from 'viem';
import { AgentOnboarding } from '../chain/contracts/artifacts.ts';
import { AGENT_FUNDING, type Deployment } from '../chain/deployment.ts';
import type { ChainLogger } from '../chain/local-chain.ts';
import type { ServerWallet } from '../chain/wallets.ts';
import { HttpError } from '../errors.ts';
import { crashAt } from '../faults.ts';
import type { Store } from '../store/index.ts';
import type { OnboardingRow } from '../store/onboarding.ts';

/** Agents funded by one transaction at most (about 300k gas each). */
const MAX_AGENTS_PER_ONBOARDING = 64;
/** How long a request about an agent waits for its wallet to be funded before giving up. */
const READY_TIMEOUT_MS = 15_000;
const RETRY_MS = 1000;
/** How often a wait for a wallet funded by another process looks at the outbox again. */
const READY_POLL_MS = 50;

interface Waiting {
  row: OnboardingRow;
  sent: boolean;
  done: Promise<void>;
  resolve(): void;
}

/**
 * Funds new agents' wallets: ETH for gas, test USDC and protocol tokens to the agent's
 * server-side wallet, and the agent pass to its registered wallet, through the onboarding
 * contract. A registration commits its agent with a row in the onboarding outbox and is
 * answered at once; this sends every waiting agent in one transaction per block, and deletes
 * their rows in the commit that logs that block. Requests about an agent (its wallet, its
 * writes) wait until it is funded, so nobody sees an agent without its funds.
 */
export function createOnboarder(deps: {
  treasury: ServerWallet;
  deployment: Deployment;
  store: Store;
  log: ChainLogger;
}) {
  const waiting = new Map<string, Waiting>();
  const byAddress = new Map<string, string>();
  /** The sends under way, if any. */
  let flushing: Promise<void> | undefined;
  let stopped = false;

  function add(row: OnboardingRow): void {
    if (waiting.has(row.agent_id)) return;
    let resolve = () => {};
    const done = new Promise<void>((resolveDone) => {
      resolve = resolveDone;
    });
    waiting.set(row.agent_id, { row, sent: false, done, resolve });
    byAddress.set(row.agent_address.toLowerCase(), row.agent_id);
    byAddress.set(row.registered_wallet.toLowerCase(), row.agent_id);
    // After this turn: the registration is answered first, and others join the batch.
    setImmediate(() => void flush());
  }

  function flush(): Promise<void> {
    flushing ??= send().finally(() => {
      flushing = undefined;
    });
    return flushing;
  }

  async function send(): Promise<void> {
    for (;;) {
      const batch = [...waiting.values()]
        .filter((entry) => !entry.sent)
        .slice(0, MAX_AGENTS_PER_ONBOARDING);
      if (batch.length === 0 || stopped) return;
      for (const entry of batch) entry.sent = true;
      crashAt('crash-before-onboarding');
      try {
        await onboard(batch.map((entry) => entry.row));
        for (const entry of batch) {
          waiting.delete(entry.row.agent_id);
          byAddress.delete(entry.row.agent_address.toLowerCase());
          byAddress.delete(entry.row.registered_wallet.toLowerCase());
          entry.resolve();
        }
      } catch (error) {
        for (const entry of batch) entry.sent = false;
        if (stopped) return;
        deps.log.error(
          `onboarding ${batch.length} agents failed, retrying: ${(error as Error).message}`,
        );
        await new Promise((resolve) => setTimeout(resolve, RETRY_MS));
      }
    }
  }

  function onboard(rows: OnboardingRow[]) {
    return deps.treasury.exclusive((session) =>
      session.send(
        [
          {
            label: 'onboarding new agents',
            address: deps.deployment.agent_onboarding,
            abi: AgentOnboarding.abi,
            functionName: 'onboard',
            args: [
              rows.map((row) => row.agent_address as Address),
              rows.map((row) => row.registered_wallet as Address),
            ],
            value: AGENT_FUNDING.eth * BigInt(rows.length),
          },
        ],
        (tx) => tx.onboarding.remove(rows.map((row) => row.agent_id)),
      ),
    );
  }

  /**
   * Resolves once the agent's wallet is funded, as the database says (its outbox row is gone):
   * a process that does not fund it (a replica) waits the same. Where this process funds it,
   * its own wait ends once the funding block is indexed too (the onboarding's send resolves
   * after the write path indexed it), so that its wallet reads back funded at once.
   */
  async function untilFunded(agentId: string): Promise<void> {
    const deadline = Date.now() + READY_TIMEOUT_MS;
    for (;;) {
      const entry = waiting.get(agentId);
      if (!entry && !(await deps.store.onboarding.isWaiting(agentId))) return;
      const left = deadline - Date.now();
      if (left <= 0) {
        throw new HttpError(503, "this agent's wallet is still being funded; try again shortly");
      }
      let timer: NodeJS.Timeout | undefined;
      const pause = new Promise<void>((resolve) => {
        timer = setTimeout(resolve, entry ? left : Math.min(left, READY_POLL_MS));
      });
      await Promise.race(entry ? [entry.done, pause] : [pause]).finally(() => clearTimeout(timer));
      if (entry && waiting.get(agentId) !== entry) return;
    }
  }

  return {
    /** Queues an agent whose row and outbox row are committed. */
    add,
    /** Queues every agent the outbox still holds (at start). */
    async resume(): Promise<void> {
      for (const row of await deps.store.onboarding.waiting()) add(row);
    },
    /**
     * Resolves once the agent's wallet is funded (at once if it is). `funding`: whether the
     * database still holds its outbox row, as the caller read it (with the agent's row).
     */
    async ready(agentId: string, funding: boolean): Promise<void> {
      if (!funding && !waiting.has(agentId)) return;
      await untilFunded(agentId);
    },
    /** The same, for an agent wallet or a registered wallet (one read of the outbox). */
    async readyWallet(address: string): Promise<void> {
      const agentId =
        byAddress.get(address.toLowerCase()) ??
        (await deps.store.onboarding.waitingWallet(address));
      if (agentId !== undefined) await untilFunded(agentId);
    },
    /**
     * At shutdown: funds what is waiting (for up to `timeoutMs`), then sends no more; whatever
     * is still waiting stays in the outbox for the next start.
     */
    /** For a restore: sends no more, and resolves once what is being sent is committed or failed. */
    async pause(): Promise<void> {
      stopped = true;
      await flushing;
    },
    /**
     * After a restore: forgets whom it was funding (their waiters are let go) and queues whom
     * the restored outbox holds.
     */
    async restart(): Promise<void> {
      for (const entry of waiting.values()) entry.resolve();
      waiting.clear();
      byAddress.clear();
      const rows = await deps.store.onboarding.waiting();
      stopped = false;
      for (const row of rows) add(row);
    },
    async stop(timeoutMs = 5000): Promise<void> {
      const deadline = Date.now() + timeoutMs;
      while (waiting.size > 0 && Date.now() < deadline) {
        let timer: NodeJS.Timeout | undefined;
        await Promise.race([
          Promise.all([...waiting.values()].map((entry) => entry.done)),
          new Promise((resolve) => {
            timer = setTimeout(resolve, deadline - Date.now());
          }),
        ]);
        // A timer left running would hold the process for the rest of the 5 s after exit.
        clearTimeout(timer);
      }
      stopped = true;
    },
  };
}
export type Onboarder = ReturnType<typeof createOnboarder>;
