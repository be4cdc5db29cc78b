import {
  closeSync,
  existsSync,
  fsyncSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  rmSync,
} from 'node:fs';
import { open, rename } from 'node:fs/promises';
import { join } from 'node:path';
import type { Hash, Hex } from 'viem';
import { ContractAddresses } from '../../api/schemas/index.ts';
import { StartupError } from '../errors.ts';
import type { Deployment } from './deployment.ts';

/** Bumped when the checkpoint file's layout changes; other versions are refused. */
export const CHECKPOINT_FORMAT = 1;
const CHAIN_DIR = 'chain';
const NAME = /^checkpoint-(\d+)\.json$/;

export class CheckpointError extends StartupError {}

/** The chain as anvil_dumpState saw it at one block, which the log then continues. */
export interface Checkpoint {
  format: number;
  /** The sandbox this chain belongs to (agentctl-state.json and sandbox.db say the same). */
  sandbox_id: string;
  chain_id: number;
  block_number: number;
  block_hash: Hash;
  block_timestamp: number;
  deployment: Deployment;
  /** anvil_dumpState's output: gzipped JSON of every account, storage slot and block. */
  state: Hex;
}

export function chainDir(stateDir: string): string {
  return join(stateDir, CHAIN_DIR);
}

export function checkpointPath(stateDir: string, block: number): string {
  return join(chainDir(stateDir), `checkpoint-${block}.json`);
}

/** Block numbers of the checkpoints on disk, newest first. */
export function listCheckpoints(stateDir: string): number[] {
  if (!existsSync(chainDir(stateDir))) return [];
  return readdirSync(chainDir(stateDir))
    .map((name) => NAME.exec(name)?.[1])
    .filter((block): block is string => block !== undefined)
    .map(Number)
    .sort((a, b) => b - a);
}

export function readCheckpoint(stateDir: string, block: number): Checkpoint {
  const path = checkpointPath(stateDir, block);
  let checkpoint: Partial<Checkpoint> | null;
  try {
    checkpoint = JSON.parse(readFileSync(path, 'utf8'));
  } catch (error) {
    const reason = (error as NodeJS.ErrnoException).code === 'ENOENT' ? 'missing' : 'unreadable';
    throw new CheckpointError(
      `the chain checkpoint ${path} is ${reason}; the chain cannot be restored`,
    );
  }
  if (typeof checkpoint !== 'object' || checkpoint === null) {
    throw new CheckpointError(`the chain checkpoint ${path} is not a checkpoint`);
  }
  if (checkpoint.format !== CHECKPOINT_FORMAT) {
    throw new CheckpointError(
      `${path} has checkpoint format ${String(checkpoint.format)}, but this agentctl reads format ${CHECKPOINT_FORMAT}; ` +
        'use a matching agentctl or start with a new --state directory',
    );
  }
  const wellFormed =
    typeof checkpoint.sandbox_id === 'string' &&
    Number.isInteger(checkpoint.chain_id) &&
    checkpoint.block_number === block &&
    typeof checkpoint.block_hash === 'string' &&
    Number.isInteger(checkpoint.block_timestamp) &&
    typeof checkpoint.state === 'string' &&
    ContractAddresses.safeParse(checkpoint.deployment).success;
  if (!wellFormed) {
    throw new CheckpointError(
      `the chain checkpoint ${path} is damaged; the chain cannot be restored`,
    );
  }
  return checkpoint as Checkpoint;
}

/**
 * Writes a temp file, fsyncs it, renames it into place and fsyncs the directory, on the
 * thread pool (a checkpoint is megabytes). `beforeRename` runs between the two (a crash
 * point for tests).
 */
export async function writeCheckpoint(
  stateDir: string,
  checkpoint: Checkpoint,
  beforeRename: () => void = () => {},
): Promise<void> {
  const dir = chainDir(stateDir);
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const path = checkpointPath(stateDir, checkpoint.block_number);
  const temp = `${path}.tmp`;
  const file = await open(temp, 'w', 0o600);
  try {
    await file.writeFile(JSON.stringify(checkpoint));
    await file.sync();
  } finally {
    await file.close();
  }
  beforeRename();
  await rename(temp, path);
  fsyncDir(dir);
}

/** Removes every checkpoint but `keep`, and temp files a crash left behind. */
export function removeCheckpointsExcept(stateDir: string, keep: number | undefined): void {
  const dir = chainDir(stateDir);
  if (!existsSync(dir)) return;
  for (const name of readdirSync(dir)) {
    const block = NAME.exec(name)?.[1];
    if (name.endsWith('.tmp') || (block !== undefined && Number(block) !== keep)) {
      rmSync(join(dir, name), { force: true });
    }
  }
}

function fsyncDir(dir: string): void {
  const fd = openSync(dir, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}
