import { lastLogged } from '../chain/restore.ts';
import { HttpError } from '../errors.ts';
import type { Onboarder } from '../operator/onboarding.ts';
import type { Store } from '../store/index.ts';
import type { ReplicaIndex } from './replica-index.ts';

/** How long an authenticated read on a replica waits for the writer's funding, or its index. */
const READY_TIMEOUT_MS = 15_000;
/** How often the database is asked again meanwhile. */
const READY_POLL_MS = 20;

/**
 * A replica's stand-in for the writer's onboarder: it funds no one (the writer does), and makes
 * an authenticated read wait as the writer's would, so that the two answer alike.
 *
 * - An agent still being funded (its outbox row is there) is answered once the writer has
 *   funded it, as on the writer (503 after READY_TIMEOUT_MS).
 * - Then, and for every authenticated read, the replica's index catches up with the chain the
 *   writer has logged when the read came: a write acknowledged before the read (through this
 *   replica, another, or the writer) is in what it reads. The writer logs a block before it
 *   indexes it, so this waits a commit's feed at most (a few ms).
 */
export function replicaOnboarder(store: Store, index: ReplicaIndex): Onboarder {
  const writersOnly = (): never => {
    throw new Error("funding agents is the writer's: a replica runs no chain");
  };
  async function until(
    deadline: number,
    done: () => Promise<boolean>,
    waitingFor: string,
  ): Promise<void> {
    while (!(await done())) {
      if (Date.now() > deadline) throw new HttpError(503, `${waitingFor}; try again shortly`);
      await new Promise((resolve) => setTimeout(resolve, READY_POLL_MS));
    }
  }
  async function caughtUp(deadline: number): Promise<void> {
    const logged = (await lastLogged(store)).number;
    await until(
      deadline,
      async () => {
        if ((index.checkpoint()?.number ?? 0) >= logged) return true;
        await index.catchUp();
        return (index.checkpoint()?.number ?? 0) >= logged;
      },
      `this replica has not read block ${logged} from its writer's index yet (is the writer running?)`,
    );
  }
  return {
    async ready(agentId: string, funding: boolean): Promise<void> {
      const deadline = Date.now() + READY_TIMEOUT_MS;
      if (funding) {
        await until(
          deadline,
          async () => !(await store.onboarding.isWaiting(agentId)),
          "this agent's wallet is still being funded",
        );
      }
      await caughtUp(deadline);
    },
    async readyWallet(address: string): Promise<void> {
      const deadline = Date.now() + READY_TIMEOUT_MS;
      await until(
        deadline,
        async () => (await store.onboarding.waitingWallet(address)) === undefined,
        'this wallet is still being funded',
      );
      await caughtUp(deadline);
    },
    add: writersOnly,
    start: writersOnly,
    pause: async () => undefined,
    restart: async () => undefined,
    stop: async () => undefined,
  } as unknown as Onboarder;
}
