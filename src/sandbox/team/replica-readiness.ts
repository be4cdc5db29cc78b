import { lastLogged } from '../chain/restore.ts';
import { HttpError } from '../errors.ts';
import type { Onboarder } from '../operator/onboarding.ts';
import type { Store } from '../store/index.ts';
import type { ReplicaIndex } from './replica-index.ts';

/** How long a read on a replica waits, at most, for the writer's funding and its index. */
const READY_TIMEOUT_MS = 15_000;
/** How often the outbox is read again while an agent is being funded (as the writer does). */
const FUNDING_POLL_MS = 50;

/**
 * A replica's stand-in for the writer's onboarder: it funds no one (the writer does), and makes
 * the reads that wait on the writer (an authenticated read, a wallet's positions or NFTs) wait
 * here too, so that the two answer alike:
 *
 * - A read first waits until the replica has published every commit the index's feed held when
 *   the read came (one read of its last seq). The writer answers a write once its block is
 *   indexed, so a write acknowledged before the read, through any server, is in its answer. A
 *   writer that stopped leaves nothing to wait for.
 * - An agent (or wallet) still being funded is answered once the writer has funded it (its
 *   outbox row is gone), then once the replica's index holds the block the writer had logged
 *   by then: the funding's. 503 after READY_TIMEOUT_MS in all, as on the writer.
 */
export function replicaOnboarder(store: Store, index: ReplicaIndex): Onboarder {
  const writersOnly = (): never => {
    throw new Error("funding agents is the writer's: a replica runs no chain");
  };
  const left = (deadline: number) => Math.max(1, deadline - Date.now());

  /**
   * Waits out a funding in progress (`waiting` reads the outbox; `seen`: the caller saw it in
   * progress already), then the block the writer had logged by its end: the funding's.
   */
  async function funded(
    deadline: number,
    waiting: () => Promise<boolean>,
    seen = false,
  ): Promise<void> {
    if (!seen && !(await waiting())) return;
    while (await waiting()) {
      if (Date.now() > deadline) {
        throw new HttpError(503, "this agent's wallet is still being funded; try again shortly");
      }
      await new Promise((resolve) => setTimeout(resolve, FUNDING_POLL_MS));
    }
    await index.awaitBlock((await lastLogged(store)).number, left(deadline));
  }

  return {
    async ready(agentId: string, funding: boolean): Promise<void> {
      const deadline = Date.now() + READY_TIMEOUT_MS;
      await index.awaitFeed(left(deadline));
      if (funding) await funded(deadline, () => store.onboarding.isWaiting(agentId), true);
    },
    async readyWallet(address: string): Promise<void> {
      const deadline = Date.now() + READY_TIMEOUT_MS;
      await index.awaitFeed(left(deadline));
      await funded(
        deadline,
        async () => (await store.onboarding.waitingWallet(address)) !== undefined,
      );
    },
    add: writersOnly,
    start: writersOnly,
    pause: async () => undefined,
    restart: async () => undefined,
    stop: async () => undefined,
  } as unknown as Onboarder;
}
