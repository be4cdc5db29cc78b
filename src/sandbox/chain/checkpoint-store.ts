import { mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Hex } from 'viem';
import { isRunning } from '../process.ts';
import type { Sql, SqlBackend } from '../store/sql.ts';
import {
  CHECKPOINT_FORMAT,
  type Checkpoint,
  CheckpointError,
  chainDir,
  checkCheckpoint,
  checkpointPath,
  listCheckpoints,
  loadCheckpointFile,
  removeCheckpointsExcept,
  writeCheckpoint,
} from './checkpoint.ts';
import { LOAD_FILES } from './restore.ts';

/**
 * Where the chain's checkpoints are kept: files in the state dir (chain/checkpoint-N.json, the
 * default) or rows of the database (`serve --database`, PostgreSQL). Recovery is the same on
 * both: anvil starts from the checkpoint sandbox.db points to, then the chain log is replayed
 * (restore.ts). A checkpoint is written whole or not at all, and is durable once write()
 * resolves; the pointer to it moves after, in the transaction that cuts the chain log, and only
 * then are the others pruned: at most two are kept, and two only for that moment.
 */
export interface CheckpointStore {
  /** The newest checkpoint's block, or undefined when there is none (the genesis is built in). */
  latest(): Promise<number | undefined>;
  /** Checkpoint `block`; a CheckpointError naming it when it is missing or damaged. */
  read(block: number): Promise<Checkpoint>;
  /**
   * Keeps `checkpoint`, durably once this resolves. `beforeCommit` runs just before it is made
   * visible (the rename of its file, the COMMIT of its row): a crash point for tests.
   */
  write(checkpoint: Checkpoint, beforeCommit?: () => void): Promise<void>;
  /** Removes every checkpoint but `keep`'s (all when undefined), and what a crash left half written. */
  prune(keep: number | undefined): Promise<void>;
  /**
   * Runs `use` with the path of a file holding `contents` (anvil's state, which anvil reads
   * with --load-state as it starts), private to this process, and removes the file after.
   */
  withStateFile<T>(
    name: string,
    contents: Uint8Array,
    use: (path: string) => Promise<T>,
  ): Promise<T>;
  /** At start: removes the state files a killed serve left behind (see withStateFile). */
  removeAbandonedStateFiles(): Promise<void>;
  /** How refusals name things, so that each says what to restore. */
  readonly words: CheckpointWords;
}

export interface CheckpointWords {
  /** Checkpoint `block` as a refusal names it ("the chain checkpoint …"): its file, or its row. */
  checkpoint(block: number): string;
  /** Where the checkpoints are: `<state>/chain`, or the database. */
  where: string;
  /** What to do when a checkpoint is damaged. */
  damaged: string;
  /** What to do when the checkpoints and sandbox.db do not belong together. */
  mismatched: string;
  /** A checkpoint newer than the pointer whose block is not in the chain log: why, and what to do. */
  olderLog(block: number): string;
}

/** The state dir's checkpoints: chain/checkpoint-N.json, each fsynced, then renamed in. */
export function directoryCheckpoints(stateDir: string): CheckpointStore {
  return {
    latest: async () => listCheckpoints(stateDir)[0],
    read: (block) => loadCheckpointFile(stateDir, block),
    write: (checkpoint, beforeCommit) => writeCheckpoint(stateDir, checkpoint, beforeCommit),
    prune: async (keep) => removeCheckpointsExcept(stateDir, keep),
    // In the state dir (0700): a start removes what a killed serve left there (LOAD_FILES).
    async withStateFile(name, contents, use) {
      const path = join(stateDir, name);
      try {
        await writeFile(path, contents, { mode: 0o600 });
        return await use(path);
      } finally {
        await rm(path, { force: true });
      }
    },
    async removeAbandonedStateFiles() {
      for (const file of LOAD_FILES) await rm(join(stateDir, file), { force: true });
    },
    words: {
      checkpoint: (block) => checkpointPath(stateDir, block),
      where: chainDir(stateDir),
      damaged: 'restore the state directory from a backup, or start with a new --state directory',
      mismatched: 'restore the database and chain/ from the same backup',
      olderLog: (block) =>
        `${stateDir}/sandbox.db is older than the chain checkpoint at block ${block} beside it ` +
        '(was an older copy of the database restored?); restore the database and chain/ from the same backup',
    },
  };
}

/** A row of chain_checkpoints: the checkpoint's fields as columns, anvil's gzipped dump as bytes. */
interface CheckpointRow {
  block_number: number;
  format: number;
  sandbox_id: string;
  chain_id: number;
  block_hash: string;
  block_timestamp: number;
  deployment: string;
  state: Uint8Array;
}

const RESTORE_DATABASE = 'restore the database from a backup';
/** The temporary directories anvil's state files are written to, named by the process's pid. */
const STATE_FILE_DIR_PREFIX = 'agentctl-anvil-state-';
const STATE_FILE_DIR = new RegExp(`^${STATE_FILE_DIR_PREFIX}(\\d+)-`);

/**
 * The checkpoints as rows of the database's chain_checkpoints table (PostgreSQL; see
 * migrations-postgres.ts), each written in one transaction: durable once COMMIT returns.
 * anvil's dump (gzipped JSON, megabytes) is kept as BYTEA, half the size of the file's hex;
 * PostgreSQL holds up to 1 GB in one value. anvil still reads its state from a file as it
 * starts: one is written for each start in a private temporary directory (0700, the file
 * 0600) and removed once anvil has read it.
 *
 * A write goes through `sql`'s write connection, one transaction at a time: on the store's own
 * backend, block commits wait while a checkpoint's megabytes go over (about 150 ms for 5 MB).
 * A writer should give it a backend of its own (createPostgresBackend(url)) to keep them off
 * the write path, as the state dir's files are: the order still holds, since the log's blocks
 * are committed before the checkpoint is written, and the pointer moves only after.
 */
export function databaseCheckpoints(sql: SqlBackend): CheckpointStore {
  const name = (block: number) => `of block ${block} in the database (chain_checkpoints)`;
  return {
    async latest() {
      const row = await sql.get<{ block: number | null }>(
        'SELECT max(block_number) AS block FROM chain_checkpoints',
      );
      return row?.block ?? undefined;
    },
    async read(block) {
      const row = await sql.get<CheckpointRow>(
        `SELECT block_number, format, sandbox_id, chain_id, block_hash, block_timestamp,
                deployment, state
           FROM chain_checkpoints WHERE block_number = ?`,
        block,
      );
      if (!row) {
        throw new CheckpointError(
          `the chain checkpoint ${name(block)} is missing; the chain cannot be restored: ${RESTORE_DATABASE}`,
        );
      }
      let deployment: unknown;
      try {
        deployment = JSON.parse(row.deployment);
      } catch {
        deployment = row.deployment;
      }
      return checkCheckpoint(
        {
          format: row.format,
          sandbox_id: row.sandbox_id,
          chain_id: row.chain_id,
          block_number: row.block_number,
          block_hash: row.block_hash,
          block_timestamp: row.block_timestamp,
          deployment,
          state: `0x${Buffer.from(row.state).toString('hex')}` as Hex,
        },
        name(block),
        block,
        {
          damaged: RESTORE_DATABASE,
          otherFormat: (format) =>
            `the chain checkpoint ${name(block)} has format ${format}, but this agentctl reads format ${CHECKPOINT_FORMAT}; use a matching agentctl`,
        },
      );
    },
    write: (checkpoint, beforeCommit = () => {}) =>
      sql.transaction(async (tx) => {
        await tx.run(
          `INSERT INTO chain_checkpoints (${CHECKPOINT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
           ON CONFLICT (block_number) DO UPDATE SET
             format = excluded.format, sandbox_id = excluded.sandbox_id,
             chain_id = excluded.chain_id, block_hash = excluded.block_hash,
             block_timestamp = excluded.block_timestamp, deployment = excluded.deployment,
             state = excluded.state`,
          ...checkpointRow(checkpoint),
        );
        beforeCommit();
      }),
    async prune(keep) {
      if (keep === undefined) await sql.run('DELETE FROM chain_checkpoints');
      else await sql.run('DELETE FROM chain_checkpoints WHERE block_number <> ?', keep);
    },
    async withStateFile(fileName, contents, use) {
      // mkdtemp makes the directory 0700: no other user reads the chain's state from it. Its
      // name carries this process's pid: a start removes those of processes that are gone.
      const dir = await mkdtemp(join(tmpdir(), `${STATE_FILE_DIR_PREFIX}${process.pid}-`));
      try {
        const path = join(dir, fileName);
        await writeFile(path, contents, { mode: 0o600 });
        return await use(path);
      } finally {
        await rm(dir, { recursive: true, force: true });
      }
    },
    async removeAbandonedStateFiles() {
      for (const entry of await readdir(tmpdir())) {
        const pid = Number(STATE_FILE_DIR.exec(entry)?.[1]);
        if (!pid || pid === process.pid || isRunning(pid)) continue;
        // Another user's is not ours to remove (and rm fails on it): left as it is.
        await rm(join(tmpdir(), entry), { recursive: true, force: true }).catch(() => undefined);
      }
    },
    words: {
      checkpoint: name,
      where: 'the database',
      damaged: RESTORE_DATABASE,
      mismatched: RESTORE_DATABASE,
      olderLog: (block) =>
        `the chain log in the database lacks block ${block}, the block of its newest chain checkpoint ` +
        `(was the database changed by hand?); ${RESTORE_DATABASE}`,
    },
  };
}

const CHECKPOINT_COLUMNS =
  'block_number, format, sandbox_id, chain_id, block_hash, block_timestamp, deployment, state';

/** `checkpoint` as the values of CHECKPOINT_COLUMNS, in order (the dump as its bytes). */
function checkpointRow(checkpoint: Checkpoint) {
  return [
    checkpoint.block_number,
    checkpoint.format,
    checkpoint.sandbox_id,
    checkpoint.chain_id,
    checkpoint.block_hash,
    checkpoint.block_timestamp,
    JSON.stringify(checkpoint.deployment),
    Buffer.from(checkpoint.state.slice(2), 'hex'),
  ] as const;
}

/**
 * The database's checkpoints as a snapshot kept in the database copies and restores them
 * (snapshots/database.ts), each inside the caller's transaction `tx`: a snapshot's schema holds
 * a chain_checkpoints of its own with its one checkpoint, and a restore makes the sandbox's
 * chain_checkpoints that one row (none for genesis), with the rest of its rows.
 */
export const snapshotCheckpoints = {
  /** Creates `schema`.chain_checkpoints (the schema must exist) holding `checkpoint` alone. */
  async copyInto(tx: Sql, schema: string, checkpoint: Checkpoint): Promise<void> {
    await tx.run(`CREATE TABLE ${schema}.chain_checkpoints (LIKE chain_checkpoints)`);
    await tx.run(
      `INSERT INTO ${schema}.chain_checkpoints (${CHECKPOINT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
      ...checkpointRow(checkpoint),
    );
  },
  /** The checkpoint `schema` holds (copyInto), as a checkpoint file holds it; undefined if none. */
  async read(on: Sql, schema: string): Promise<Checkpoint | undefined> {
    const row = await on.get<CheckpointRow>(
      `SELECT ${CHECKPOINT_COLUMNS} FROM ${schema}.chain_checkpoints`,
    );
    return (
      row && {
        format: row.format,
        sandbox_id: row.sandbox_id,
        chain_id: row.chain_id,
        block_number: row.block_number,
        block_hash: row.block_hash as Hex,
        block_timestamp: row.block_timestamp,
        deployment: JSON.parse(row.deployment),
        state: `0x${Buffer.from(row.state).toString('hex')}` as Hex,
      }
    );
  },
  /**
   * Replaces every checkpoint with `schema`'s (copyInto), or with none (undefined: genesis,
   * which is built in). The dump is copied inside the database, never sent over the wire.
   */
  async replaceWithin(tx: Sql, schema: string | undefined): Promise<void> {
    await tx.run('DELETE FROM chain_checkpoints');
    if (schema === undefined) return;
    await tx.run(
      `INSERT INTO chain_checkpoints (${CHECKPOINT_COLUMNS})
       SELECT ${CHECKPOINT_COLUMNS} FROM ${schema}.chain_checkpoints`,
    );
  },
};
