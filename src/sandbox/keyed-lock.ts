/**
 * Runs async work one at a time per key, in arrival order. Work under different keys
 * runs concurrently. A failure does not block the work queued after it.
 */
export function createKeyedLock() {
  const tails = new Map<string, Promise<unknown>>();
  return function withLock<T>(key: string, work: () => Promise<T>): Promise<T> {
    const previous = tails.get(key) ?? Promise.resolve();
    const run = previous.then(work);
    const tail = run.catch(() => undefined);
    tails.set(key, tail);
    // Forget the key once nothing is queued behind this work, so the map stays small.
    tail.then(() => {
      if (tails.get(key) === tail) tails.delete(key);
    });
    return run;
  };
}
