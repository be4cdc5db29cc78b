import { AsyncLocalStorage } from 'node:async_hooks';
import { createKeyedLock } from '../keyed-lock.ts';

/** Runs one statement of a transaction, refused once the transaction is over. */
export type WhileOpen = <T>(statement: () => Promise<T>) => Promise<T>;

/**
 * The write discipline both backends share: writes take turns, in arrival order, and a
 * transaction holds the turn until it ends (it may await meanwhile). A write outside the
 * transaction made from inside it would wait for itself: it is refused instead.
 */
export function createWriteTurns() {
  const lock = createKeyedLock();
  // The transaction holding the turn now, and the async context of each.
  let current: object | undefined;
  const within = new AsyncLocalStorage<object>();

  /** Runs `work` holding the turn (refused from inside the transaction holding it). */
  function exclusive<T>(work: () => Promise<T> | T): Promise<T> {
    if (current !== undefined && within.getStore() === current) {
      return Promise.reject(
        new Error('a write outside its transaction was made from inside it: use the transaction'),
      );
    }
    return lock('write', async () => await work());
  }

  return {
    exclusive,
    /**
     * Runs `work` holding the turn, as one transaction: its statements go through `whileOpen`,
     * which refuses them once `work` has settled (a transaction kept and used later).
     */
    transaction<T>(work: (whileOpen: WhileOpen) => Promise<T>): Promise<T> {
      return exclusive(async () => {
        const token = {};
        current = token;
        const whileOpen: WhileOpen = (statement) =>
          current === token
            ? statement()
            : Promise.reject(new Error('the transaction is over: its rows were committed'));
        try {
          return await within.run(token, () => work(whileOpen));
        } finally {
          current = undefined;
        }
      });
    },
  };
}
