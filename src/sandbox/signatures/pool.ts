import { availableParallelism } from 'node:os';
import { Worker } from 'node:worker_threads';
import type { Hex } from 'viem';
import { recoverSigner } from './recover.ts';

type Resolve = (signer: string | undefined) => void;

/**
 * Recovers signers on worker threads. Recovery is the costliest step of a registration
 * (about 2 ms of pure-JS elliptic-curve work each), and on the main thread it would hold up
 * every other request; on workers it runs beside them. Workers start on first use, one per
 * core but the main thread's, and never keep the process alive. Where no worker can be
 * started, recovery runs inline.
 */
export function createSignerPool(size = Math.max(1, availableParallelism() - 1)) {
  interface Job {
    message: string;
    signature: Hex;
    resolve: Resolve;
  }
  const workers: Array<{ worker: Worker; jobs: Map<number, Job> }> = [];
  let nextId = 1;
  let broken = false;

  function start(): void {
    // Runs from dist (.js) or, under the tests, from the sources (.ts).
    const extension = import.meta.url.endsWith('.ts') ? 'ts' : 'js';
    for (let i = 0; i < size; i++) {
      const worker = new Worker(new URL(`./worker.${extension}`, import.meta.url));
      const entry = { worker, jobs: new Map<number, Job>() };
      worker.unref();
      worker.on('message', ({ id, signer }: { id: number; signer: string | undefined }) => {
        entry.jobs.get(id)?.resolve(signer);
        entry.jobs.delete(id);
      });
      worker.on('error', () => {
        // A failed worker's jobs are recovered inline, and workers are not used again.
        broken = true;
        for (const job of entry.jobs.values()) {
          void recoverSigner(job.message, job.signature).then(job.resolve);
        }
        entry.jobs.clear();
      });
      workers.push(entry);
    }
  }

  return {
    signerOf(message: string, signature: Hex): Promise<string | undefined> {
      if (broken) return recoverSigner(message, signature);
      if (workers.length === 0) {
        try {
          start();
        } catch {
          broken = true;
          return recoverSigner(message, signature);
        }
      }
      const entry = workers.reduce((least, w) => (w.jobs.size < least.jobs.size ? w : least));
      const id = nextId++;
      return new Promise<string | undefined>((resolve) => {
        entry.jobs.set(id, { message, signature, resolve });
        entry.worker.postMessage({ id, message, signature });
      });
    },
    async close(): Promise<void> {
      const closing = workers.splice(0);
      await Promise.all(closing.map(({ worker }) => worker.terminate()));
      for (const { jobs } of closing) for (const job of jobs.values()) job.resolve(undefined);
    },
  };
}
export type SignerPool = ReturnType<typeof createSignerPool>;
