import { describe, expect, it } from 'vitest';
import { createPersister } from '../../../src/sandbox/chain/snapshot.ts';

/** A dump that records when it ran and can be finished by hand. */
function controlledDump() {
  const runs: Array<{ finish: () => void; concurrent: number }> = [];
  let active = 0;
  const dump = () =>
    new Promise<void>((resolve) => {
      active += 1;
      runs.push({
        concurrent: active,
        finish: () => {
          active -= 1;
          resolve();
        },
      });
    });
  return { dump, runs };
}

const tick = () => new Promise((resolve) => setTimeout(resolve, 0));

describe('createPersister (group commit)', () => {
  it('never runs two dumps at once, whatever the interleaving', async () => {
    const { dump, runs } = controlledDump();
    const { persist } = createPersister(dump);
    const a = persist();
    const b = persist();
    const c = a.then(() => persist());
    await tick();
    expect(runs).toHaveLength(1);
    runs[0]?.finish();
    await a;
    await tick();
    expect(runs).toHaveLength(2);
    runs[1]?.finish();
    await b;
    await tick();
    runs[2]?.finish();
    await c;
    expect(runs.every((run) => run.concurrent === 1)).toBe(true);
  });

  it('covers every caller with a dump that started after it called', async () => {
    const { dump, runs } = controlledDump();
    const { persist } = createPersister(dump);
    const first = persist();
    await tick();
    // These arrive while the first dump runs: they share the one queued behind it.
    const joined = [persist(), persist(), persist()];
    runs[0]?.finish();
    await first;
    await tick();
    expect(runs).toHaveLength(2);
    let settled = false;
    Promise.all(joined).then(() => {
      settled = true;
    });
    await tick();
    expect(settled).toBe(false);
    runs[1]?.finish();
    await Promise.all(joined);
    expect(runs).toHaveLength(2);
  });

  it('keeps going after a failed dump', async () => {
    let calls = 0;
    const { persist } = createPersister(async () => {
      calls += 1;
      if (calls === 1) throw new Error('disk full');
    });
    await expect(persist()).rejects.toThrow('disk full');
    await expect(persist()).resolves.toBeUndefined();
  });
});
