/** A worker thread that recovers signers (see pool.ts), off the main thread. */
import { parentPort } from 'node:worker_threads';
import type { Hex } from 'viem';
import { recoverSigner } from './recover.ts';

parentPort?.on('message', async (job: { id: number; message: string; signature: Hex }) => {
  const signer = await recoverSigner(job.message, job.signature);
  parentPort?.postMessage({ id: job.id, signer });
});
