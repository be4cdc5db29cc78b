import { spawnSync } from 'node:child_process';
import {
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import pg from 'pg';
import type { Hash, Hex } from 'viem';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { CHECKPOINT_FORMAT, type Checkpoint } from '../../../src/sandbox/chain/checkpoint.ts';
import {
  type CheckpointStore,
  databaseCheckpoints,
  directoryCheckpoints,
} from '../../../src/sandbox/chain/checkpoint-store.ts';
import { GENESIS } from '../../../src/sandbox/chain/genesis.ts';
import {
  databaseMnemonic,
  directoryMnemonic,
  type MnemonicStore,
} from '../../../src/sandbox/chain/mnemonic.ts';
import { LOAD_FILES } from '../../../src/sandbox/chain/restore.ts';
import { createSandboxClock } from '../../../src/sandbox/clock.ts';
import { type SandboxRuntime, startRuntime } from '../../../src/sandbox/runtime.ts';
import { SANDBOX_SECRET_ENV } from '../../../src/sandbox/sandbox-secret.ts';
import { createPostgresBackend, openPostgresStore } from '../../../src/sandbox/store/postgres.ts';
import type { SqlBackend } from '../../../src/sandbox/store/sql.ts';
import { type FreshDatabase, freshDatabase } from '../../helpers/postgres.ts';
import { rpcCall } from '../../helpers/serve.ts';

/**
 * Where the chain's checkpoints and the wallet mnemonic are kept: the state dir's files, or the
 * database (a sandbox kept in PostgreSQL alone). Each implementation passes the same cases.
 */

/** One kind of storage, opened on the same place again and again (as a restarted serve does). */
interface Place {
  name: 'directory' | 'database';
  /** Once per file. */
  start(): Promise<void>;
  stop(): Promise<void>;
  /** An empty place (nothing a previous case kept). */
  fresh(): Promise<void>;
  /** The place opened (again): closes what an earlier open() opened. */
  open(): Promise<SqlBackend | string>;
  /** The database's URL (the database place only). */
  url?(): string;
}

function directoryPlace(): Place {
  let dir = '';
  const dirs: string[] = [];
  return {
    name: 'directory',
    start: async () => undefined,
    async stop() {
      for (const each of dirs) rmSync(each, { recursive: true, force: true });
    },
    async fresh() {
      dir = mkdtempSync(join(tmpdir(), 'agentctl-chain-state-'));
      dirs.push(dir);
    },
    open: async () => dir,
  };
}

function databasePlace(): Place {
  let database: FreshDatabase | undefined;
  let backend: SqlBackend | undefined;
  const url = () => (database as FreshDatabase).url;
  const close = async () => {
    await backend?.close();
    backend = undefined;
  };
  return {
    name: 'database',
    async start() {
      database = await freshDatabase();
    },
    async stop() {
      await close();
      await database?.drop();
    },
    async fresh() {
      await close();
      const client = new pg.Client({ connectionString: url() });
      await client.connect();
      try {
        // Every table, the schema's version included: the next open() migrates anew.
        await client.query('DROP SCHEMA public CASCADE; CREATE SCHEMA public');
      } finally {
        await client.end();
      }
    },
    async open() {
      await close();
      backend = await createPostgresBackend(url());
      return backend;
    },
    url,
  };
}

const PLACES = [directoryPlace, databasePlace];

/** A checkpoint of block `block`: the genesis's chain, named as another block's. */
function checkpointAt(block: number, sandboxId = 'sandbox-1'): Checkpoint {
  return {
    format: CHECKPOINT_FORMAT,
    sandbox_id: sandboxId,
    chain_id: GENESIS.chain_id,
    block_number: block,
    block_hash: `0x${block.toString(16).padStart(64, '0')}` as Hash,
    block_timestamp: GENESIS.block_timestamp + block,
    deployment: GENESIS.deployment as Checkpoint['deployment'],
    state: GENESIS.state as Hex,
  };
}

describe.each(PLACES.map((place) => place()))('checkpoints in the $name', (place) => {
  const checkpointsOf = (opened: SqlBackend | string): CheckpointStore =>
    typeof opened === 'string' ? directoryCheckpoints(opened) : databaseCheckpoints(opened);
  let checkpoints: CheckpointStore;
  const dirsMade: string[] = [];
  beforeAll(() => place.start());
  afterAll(async () => {
    for (const dir of dirsMade) rmSync(dir, { recursive: true, force: true });
    await place.stop();
  });
  beforeEach(async () => {
    await place.fresh();
    checkpoints = checkpointsOf(await place.open());
  });

  it('holds none at first, and refuses to read one it does not hold', async () => {
    expect(await checkpoints.latest()).toBeUndefined();
    await expect(checkpoints.read(5)).rejects.toThrow(
      `the chain checkpoint ${checkpoints.words.checkpoint(5)} is missing`,
    );
  });

  it('keeps what it wrote, newest first, prunes all but one, and still has it after a reopen', async () => {
    await checkpoints.write(checkpointAt(5));
    await checkpoints.write(checkpointAt(9));
    expect(await checkpoints.latest()).toBe(9);
    expect(await checkpoints.read(5)).toEqual(checkpointAt(5));
    expect(await checkpoints.read(9)).toEqual(checkpointAt(9));
    await checkpoints.prune(9);
    expect(await checkpoints.latest()).toBe(9);
    await expect(checkpoints.read(5)).rejects.toThrow(/is missing/);
    checkpoints = checkpointsOf(await place.open());
    expect(await checkpoints.latest()).toBe(9);
    expect(await checkpoints.read(9)).toEqual(checkpointAt(9));
    await checkpoints.prune(undefined);
    expect(await checkpoints.latest()).toBeUndefined();
  });

  it('keeps nothing of a write cut short before it was made visible (a crash point)', async () => {
    await checkpoints.write(checkpointAt(5));
    await expect(
      checkpoints.write(checkpointAt(9), () => {
        throw new Error('crashed');
      }),
    ).rejects.toThrow('crashed');
    expect(await checkpoints.latest()).toBe(5);
    // What a start does: every checkpoint but the one in use goes, half-written ones too.
    await checkpoints.prune(5);
    checkpoints = checkpointsOf(await place.open());
    expect(await checkpoints.latest()).toBe(5);
    expect(await checkpoints.read(5)).toEqual(checkpointAt(5));
  });

  it("hands anvil's state file to it privately, and removes it after, even on failure", async () => {
    const seen: Array<{ path: string; mode: number; dirMode: number; text: string }> = [];
    const contents = Buffer.from('{"block":{}}');
    const value = await checkpoints.withStateFile(
      'anvil-load-state.json',
      contents,
      async (path) => {
        seen.push({
          path,
          mode: statSync(path).mode & 0o777,
          dirMode: statSync(dirname(path)).mode & 0o777,
          text: readFileSync(path, 'utf8'),
        });
        return 'loaded';
      },
    );
    expect(value).toBe('loaded');
    await expect(
      checkpoints.withStateFile('anvil-load-state.json', contents, async (path) => {
        seen.push({ path, mode: 0, dirMode: 0, text: '' });
        throw new Error('anvil failed');
      }),
    ).rejects.toThrow('anvil failed');
    expect(seen[0]).toMatchObject({ mode: 0o600, dirMode: 0o700, text: '{"block":{}}' });
    for (const { path } of seen) expect(() => statSync(path)).toThrow(/ENOENT/);
    // The database's are in a temporary directory of their own, removed with the file.
    if (place.name === 'database') {
      for (const { path } of seen) expect(() => statSync(dirname(path))).toThrow(/ENOENT/);
    }
  });

  it('removes the state files a killed serve left, and no one else’s', async () => {
    await checkpoints.write(checkpointAt(5));
    const opened = await place.open();
    checkpoints = checkpointsOf(opened);
    const left: string[] = [];
    const kept: string[] = [];
    if (typeof opened === 'string') {
      for (const file of LOAD_FILES) left.push(join(opened, file));
    } else {
      // A process that has exited: its directory is abandoned. This one's is in use.
      const gone = spawnSync(process.execPath, ['-e', '']).pid;
      left.push(mkdtempSync(join(tmpdir(), `agentctl-anvil-state-${gone}-`)));
      kept.push(mkdtempSync(join(tmpdir(), `agentctl-anvil-state-${process.pid}-`)));
      dirsMade.push(...kept);
    }
    for (const path of left) writeFileSync(path.endsWith('.json') ? path : join(path, 'a'), '{}');
    await checkpoints.removeAbandonedStateFiles();
    for (const path of left) expect(existsSync(path), path).toBe(false);
    for (const path of kept) expect(existsSync(path), path).toBe(true);
    expect(await checkpoints.read(5)).toEqual(checkpointAt(5));
  });

  it.runIf(place.name === 'database')(
    'refuses a row of another format, or a damaged one, naming it',
    async () => {
      await checkpoints.write(checkpointAt(5));
      const client = new pg.Client({ connectionString: place.url?.() });
      await client.connect();
      try {
        await client.query('UPDATE chain_checkpoints SET format = 2');
        await expect(checkpoints.read(5)).rejects.toThrow(
          'the chain checkpoint of block 5 in the database (chain_checkpoints) has format 2, but this agentctl reads format 1',
        );
        await client.query(`UPDATE chain_checkpoints SET format = 1, deployment = '{"usdc": 1}'`);
        await expect(checkpoints.read(5)).rejects.toThrow(
          /the chain checkpoint of block 5 in the database \(chain_checkpoints\) is damaged: deployment\.usdc is 1, .*; restore the database from a backup/,
        );
      } finally {
        await client.end();
      }
    },
  );
});

const SECRET = 'correct horse battery staple, twice over';

describe.each(PLACES.map((place) => place()))('the wallet mnemonic in the $name', (place) => {
  const mnemonicOf = (
    opened: SqlBackend | string,
    env: NodeJS.ProcessEnv = { [SANDBOX_SECRET_ENV]: SECRET },
  ): MnemonicStore =>
    typeof opened === 'string' ? directoryMnemonic(opened) : databaseMnemonic(opened, env);
  beforeAll(() => place.start());
  afterAll(() => place.stop());
  beforeEach(() => place.fresh());

  it("holds none before a new sandbox's is made, then the same one after every reopen", async () => {
    let mnemonics = mnemonicOf(await place.open());
    expect(await mnemonics.read()).toBeUndefined();
    const created = await mnemonics.create();
    expect(created.split(' ')).toHaveLength(24);
    expect(await mnemonics.read()).toBe(created);
    mnemonics = mnemonicOf(await place.open());
    expect(await mnemonics.read()).toBe(created);
  });

  it.runIf(place.name === 'database')(
    'keeps it encrypted: the stored bytes hold neither the phrase nor any of its words',
    async () => {
      const created = await mnemonicOf(await place.open()).create();
      const client = new pg.Client({ connectionString: place.url?.() });
      await client.connect();
      try {
        const { rows } = await client.query<Record<string, Buffer | string | boolean>>(
          'SELECT * FROM wallet_mnemonic',
        );
        expect(rows).toHaveLength(1);
        const stored = Buffer.concat(
          Object.values(rows[0] as object).map((value) =>
            Buffer.isBuffer(value) ? value : Buffer.from(String(value)),
          ),
        );
        expect(stored.includes(created)).toBe(false);
        for (const word of created.split(' ').filter((each) => each.length >= 5)) {
          expect(stored.includes(word), word).toBe(false);
        }
      } finally {
        await client.end();
      }
    },
  );

  it.runIf(place.name === 'database')(
    'refuses a missing, a short or another secret, naming the variable and never a secret',
    async () => {
      const opened = await place.open();
      // A new sandbox needs the secret too: a mnemonic is never kept unsealed.
      await expect(mnemonicOf(opened, {}).create()).rejects.toThrow(
        `${SANDBOX_SECRET_ENV} is not set`,
      );
      const created = await mnemonicOf(opened).create();
      await expect(mnemonicOf(opened, {}).read()).rejects.toThrow(
        `${SANDBOX_SECRET_ENV} is not set`,
      );
      await expect(mnemonicOf(opened, { [SANDBOX_SECRET_ENV]: 'short' }).read()).rejects.toThrow(
        `${SANDBOX_SECRET_ENV} is too short (5 characters)`,
      );
      const other = 'another secret of enough length';
      const refused = await mnemonicOf(opened, { [SANDBOX_SECRET_ENV]: other })
        .read()
        .then(
          () => undefined,
          (error: Error) => error,
        );
      expect(refused?.message).toBe(
        `${SANDBOX_SECRET_ENV} does not decrypt the wallet mnemonic in the database (wallet_mnemonic): ` +
          'it is not the secret this sandbox was created with; start with that one',
      );
      for (const secret of [other, SECRET, created]) {
        expect(refused?.message).not.toContain(secret);
      }
      // The right one still reads it: nothing was changed by the refusals.
      expect(await mnemonicOf(opened).read()).toBe(created);
    },
  );

  it.runIf(place.name === 'database')(
    'never replaces a kept mnemonic: a second creation gets the first',
    async () => {
      const opened = await place.open();
      const first = await mnemonicOf(opened).create();
      expect(await mnemonicOf(opened).create()).toBe(first);
    },
  );
});

const SILENT = { info() {}, warn() {}, error() {} };

/**
 * A real anvil, its checkpoint kept in the database: a sandbox started in another, empty
 * directory on the same database (another machine) loads it into a new anvil, through a
 * temporary file, and holds the same chain, and the same wallets.
 */
describe('a sandbox whose checkpoints and mnemonic are in the database', () => {
  let database: FreshDatabase;
  const dirs: string[] = [];
  const running: SandboxRuntime[] = [];
  beforeAll(async () => {
    database = await freshDatabase();
  });
  afterAll(async () => {
    for (const runtime of running) await runtime.close().catch(() => undefined);
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
    await database?.drop();
  });

  /** A writer on the database, in a directory of its own (its pid files, index.db). */
  async function startWriter(sandboxId: string): Promise<{ runtime: SandboxRuntime; dir: string }> {
    const dir = mkdtempSync(join(tmpdir(), 'agentctl-db-writer-'));
    dirs.push(dir);
    const store = await openPostgresStore(database.url);
    const runtime = await startRuntime({
      stateDir: dir,
      persistent: true,
      clock: await createSandboxClock(store.meta),
      store,
      sandboxId,
      log: SILENT,
      checkpoints: databaseCheckpoints(store.sql),
      mnemonic: databaseMnemonic(store.sql, { [SANDBOX_SECRET_ENV]: SECRET }),
    });
    running.push(runtime);
    return { runtime, dir };
  }

  it('starts a new anvil from the checkpoint the database holds, and reads the same state', async () => {
    const sandboxId = 'db-sandbox';
    const first = await startWriter(sandboxId);
    const { rpcUrl } = first.runtime.chain;
    const holder = '0x00000000000000000000000000000000c0ffee00';
    const balance = '0x1234567890abcdef';
    // A change outside transactions: only the checkpoint keeps it (a replay of the log would
    // not); and a block past the genesis, which is built in (never checkpointed).
    await rpcCall(rpcUrl, 'anvil_setBalance', [holder, balance]);
    await rpcCall(rpcUrl, 'evm_mine');
    const mined = (await rpcCall(rpcUrl, 'eth_blockNumber')) as string;
    const block = await first.runtime.chain.checkpoint();
    expect(block).toBe(Number(mined));
    const agentWallet = first.runtime.chain.wallet(1000).address;
    // Nothing of it in the writer's directory: no chain/, no wallet.mnemonic.
    expect(readdirSync(first.dir).filter((name) => !/^(index\.db|anvil)/.test(name))).toEqual([]);
    await first.runtime.close();
    running.splice(running.indexOf(first.runtime), 1);

    const backend = await createPostgresBackend(database.url);
    try {
      expect(await databaseCheckpoints(backend).latest()).toBe(block);
    } finally {
      await backend.close();
    }
    const second = await startWriter(sandboxId);
    expect(second.dir).not.toBe(first.dir);
    expect(await rpcCall(second.runtime.chain.rpcUrl, 'eth_getBalance', [holder, 'latest'])).toBe(
      balance,
    );
    // The same mnemonic, unsealed with the same secret: the same agent wallets.
    expect(second.runtime.chain.wallet(1000).address).toBe(agentWallet);
  });
});
