import { toHex } from 'viem';
import { afterEach, describe, expect, it } from 'vitest';
import { listCheckpoints, readCheckpoint } from '../../../src/sandbox/chain/checkpoint.ts';
import {
  CHECKPOINT_AFTER_MS,
  CHECKPOINT_EVERY_BLOCKS,
} from '../../../src/sandbox/chain/local-chain.ts';
import { readPointer } from '../../../src/sandbox/chain/restore.ts';
import { admin, createTestSandbox, type TestSandbox } from '../../helpers/sandbox.ts';
import { rpcCall, until } from '../../helpers/serve.ts';

/**
 * The automatic checkpoints (local-chain.ts), one trigger at a time, with blocks mined over
 * the RPC URL (the sandbox logs them as its own): nobody asks for these checkpoints.
 */
let sandbox: TestSandbox | undefined;
afterEach(async () => {
  await sandbox?.close();
  sandbox = undefined;
});

/** The chain's head block, read over the RPC URL. */
async function head(rpcUrl: string): Promise<{ number: number; hash: string }> {
  const block = (await rpcCall(rpcUrl, 'eth_getBlockByNumber', ['latest', false])) as {
    number: string;
    hash: string;
  };
  return { number: Number(block.number), hash: block.hash };
}

describe('automatic checkpoints', () => {
  it(`checkpoints a new block by itself once it has waited ${CHECKPOINT_AFTER_MS} ms`, async () => {
    const started = await createTestSandbox();
    sandbox = started;
    const { rpcUrl } = started.chain;
    expect(listCheckpoints(started.dir)).toEqual([]);
    const from = (await readPointer(started.store)).block;
    // One block: far from the block count's trigger, so only the time's can take it.
    await rpcCall(rpcUrl, 'evm_mine');
    const mined = await head(rpcUrl);
    expect(mined.number).toBe(from + 1);
    // The database points at a checkpoint once its file is on disk.
    await until(async () => (await readPointer(started.store)).block > from, 20_000);
    expect(await readPointer(started.store)).toEqual({ block: mined.number, hash: mined.hash });
    expect(listCheckpoints(started.dir)).toEqual([mined.number]);
    expect(readCheckpoint(started.dir, mined.number).block_hash).toBe(mined.hash);
  });

  it(`checkpoints as soon as ${CHECKPOINT_EVERY_BLOCKS} blocks follow the last checkpoint`, async () => {
    // The time's trigger far off: a checkpoint that comes is the block count's.
    const started = await createTestSandbox({ checkpointAfterMs: 3_600_000 });
    sandbox = started;
    const { rpcUrl } = started.chain;
    const from = (await readPointer(started.store)).block;
    // One block short of the count, logged by the sandbox, and seen by what runs after a
    // commit: the standby follows the log from there, and a checkpoint due would be queued.
    await rpcCall(rpcUrl, 'anvil_mine', [toHex(CHECKPOINT_EVERY_BLOCKS - 1)]);
    await until(
      () => (started.chain.standby().block_number ?? 0) >= from + CHECKPOINT_EVERY_BLOCKS - 1,
    );
    // The block that makes the count, the sandbox's own write: it is made after any
    // checkpoint already queued, so one taken too early would not hold it.
    const advanced = await admin(started.app, 'POST', '/sandbox/clock/advance', { seconds: 1 });
    expect(advanced.statusCode, advanced.body).toBe(200);
    const mined = await head(rpcUrl);
    expect(mined.number).toBe(from + CHECKPOINT_EVERY_BLOCKS);
    await until(async () => (await readPointer(started.store)).block > from, 20_000);
    // Taken at the block that made the count, not before it.
    expect(await readPointer(started.store)).toEqual({ block: mined.number, hash: mined.hash });
    expect(listCheckpoints(started.dir)).toEqual([mined.number]);
    expect(readCheckpoint(started.dir, mined.number).block_hash).toBe(mined.hash);
  });
});
