import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { open, readFile, rename } from 'node:fs/promises';
import { join } from 'node:path';
import type { Hash, Hex } from 'viem';
import { z } from 'zod';
import { CHAIN_ID, CHAIN_NAME, ContractAddresses } from '../../api/schemas/index.ts';
import { fsyncPath } from '../../files/atomic.ts';
import { fileErrorMessage, isFileError, StartupError } from '../errors.ts';
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

const RESTORE = 'restore the state directory from a backup, or start with a new --state directory';

/** What a checkpoint file must hold; `block` is the number in its name. */
function checkpointShape(block: number) {
  return z.object({
    format: z.literal(CHECKPOINT_FORMAT, { error: `must be ${CHECKPOINT_FORMAT}` }),
    sandbox_id: z.string().min(1, { error: 'must name the sandbox' }),
    chain_id: z.literal(CHAIN_ID, {
      error: `must be ${CHAIN_ID}, the sandbox's chain (${CHAIN_NAME})`,
    }),
    block_number: z.literal(block, { error: `must be ${block}, the block in the file's name` }),
    block_hash: z.string().regex(/^0x[0-9a-fA-F]{64}$/, {
      error: 'must be a block hash (0x and 64 hex digits)',
    }),
    block_timestamp: z.number().int().nonnegative({ error: 'must be a Unix time' }),
    deployment: ContractAddresses,
    // Only its start: it is megabytes, and anvil_loadState refuses a damaged one.
    state: z.string().startsWith('0x', { error: "must be anvil's dump, in hex" }),
  });
}

const EXPECTED: Record<string, string> = {
  string: 'a string',
  number: 'a number',
  int: 'an integer',
  object: 'an object',
  array: 'an array',
  boolean: 'true or false',
};

export function readCheckpoint(stateDir: string, block: number): Checkpoint {
  const path = checkpointPath(stateDir, block);
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    throw unreadable(error, path, stateDir);
  }
  return parseCheckpoint(text, path, block);
}

/** readCheckpoint on the thread pool, for a running serve: a checkpoint is megabytes. */
export async function loadCheckpointFile(stateDir: string, block: number): Promise<Checkpoint> {
  const path = checkpointPath(stateDir, block);
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (error) {
    throw unreadable(error, path, stateDir);
  }
  return parseCheckpoint(text, path, block);
}

function unreadable(error: unknown, path: string, stateDir: string): CheckpointError {
  if ((error as NodeJS.ErrnoException).code === 'ENOENT') {
    return new CheckpointError(
      `the chain checkpoint ${path} is missing; the chain cannot be restored: ${RESTORE}`,
    );
  }
  return isFileError(error)
    ? new CheckpointError(fileErrorMessage(error, stateDir))
    : new CheckpointError(`the chain checkpoint ${path} is unreadable; ${RESTORE}`);
}

export function parseCheckpoint(text: string, path: string, block: number): Checkpoint {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    throw new CheckpointError(`the chain checkpoint ${path} is not valid JSON; ${RESTORE}`);
  }
  return checkCheckpoint(raw, path, block);
}

/**
 * `raw` as a checkpoint of block `block`, or a CheckpointError naming it (`path`: its file, or
 * how its row is named) and what is wrong; `refusals` say what to do (the state dir's by default).
 */
export function checkCheckpoint(
  raw: unknown,
  path: string,
  block: number,
  refusals: { damaged: string; otherFormat(format: number): string } = {
    damaged: RESTORE,
    otherFormat: (format) =>
      `${path} has checkpoint format ${format}, but this agentctl reads format ${CHECKPOINT_FORMAT}; ` +
      'use a matching agentctl or start with a new --state directory',
  },
): Checkpoint {
  const format = (raw as { format?: unknown } | null)?.format;
  if (typeof format === 'number' && format !== CHECKPOINT_FORMAT) {
    throw new CheckpointError(refusals.otherFormat(format));
  }
  const parsed = checkpointShape(block).safeParse(raw, {
    error: (issue) =>
      issue.code === 'invalid_type'
        ? `must be ${EXPECTED[issue.expected] ?? issue.expected}`
        : undefined,
  });
  if (!parsed.success) {
    const issue = parsed.error.issues[0] as z.core.$ZodIssue;
    throw new CheckpointError(
      `the chain checkpoint ${path} is damaged: ${describeIssue(raw, issue)}; ${refusals.damaged}`,
    );
  }
  return parsed.data as Checkpoint;
}

/** "chain_id is "84532" (a string), but it must be 84532, …": the field, its value, the rule. */
function describeIssue(raw: unknown, issue: z.core.$ZodIssue): string {
  if (issue.path.length === 0) return `it holds ${show(raw)}, not a checkpoint (a JSON object)`;
  const field = issue.path.join('.');
  let value: unknown = raw;
  for (const key of issue.path) value = (value as Record<PropertyKey, unknown>)?.[key];
  if (value === undefined) return `${field} is missing`;
  return `${field} is ${show(value)}, but it ${issue.message}`;
}

function show(value: unknown): string {
  if (typeof value === 'string') {
    return `${JSON.stringify(value.length > 70 ? `${value.slice(0, 67)}...` : value)} (a string)`;
  }
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'object' && value !== null) return 'an object';
  return String(value);
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
  fsyncPath(dir);
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
