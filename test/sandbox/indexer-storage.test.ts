import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import pg from 'pg';
import {
  type Address,
  createPublicClient,
  encodeAbiParameters,
  encodeFunctionData,
  type Hex,
  http,
  keccak256,
  toHex,
} from 'viem';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CHAIN_ID } from '../../src/api/schemas/index.ts';
import { type AnvilProcess, startAnvil } from '../../src/sandbox/chain/anvil.ts';
import { MockUSDC } from '../../src/sandbox/chain/contracts/artifacts.ts';
import type { Deployment } from '../../src/sandbox/chain/deployment.ts';
import { GENESIS } from '../../src/sandbox/chain/genesis.ts';
import { createRpcClient, type RpcClient } from '../../src/sandbox/chain/rpc.ts';
import { IndexUnavailableError } from '../../src/sandbox/indexer/failure.ts';
import {
  type Checkpoint,
  createIndexer,
  type Indexer,
  type IndexStorageOptions,
} from '../../src/sandbox/indexer/indexer.ts';
import { INDEX_MIGRATIONS } from '../../src/sandbox/indexer/schema-postgres.ts';
import type { SqlTransaction } from '../../src/sandbox/store/sql.ts';
import { type FreshDatabase, freshDatabase } from '../helpers/postgres.ts';
import { startTcpCut, type TcpCut } from '../helpers/tcp-cut.ts';

/**
 * The indexer's writer on each of its storages (index.db, and the index's schema of a
 * PostgreSQL database): blocks indexed in one transaction per step, reads of committed rows
 * only, a reorg's rollback, a correction, another chain's index started afresh, a restart that
 * goes on from the stored checkpoint. One anvil (the sandbox's genesis) for the file: each
 * storage's cases end with the chain put back as it found it.
 */
let dir: string;
let anvil: AnvilProcess;
let rpc: RpcClient;
const deployment = GENESIS.deployment as unknown as Deployment;
const vault = deployment.vaults.moderate as Address;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'agentctl-index-storage-'));
  const state = join(dir, 'genesis.json');
  writeFileSync(state, gunzipSync(Buffer.from(GENESIS.state.slice(2), 'hex')));
  anvil = await startAnvil({ stateDir: dir, mining: 'manual', loadState: state });
  rpc = createRpcClient(anvil.rpcUrl);
  // anvil refuses to mine below its own start time; the genesis is older than that.
  await rpc.call('anvil_setTime', [GENESIS.block_timestamp]);
});
afterAll(async () => {
  await anvil?.stop();
  rmSync(dir, { recursive: true, force: true });
});

const reader = () => createPublicClient({ transport: http(anvil.rpcUrl) });
const chainHead = () => reader().getBlock({ blockTag: 'latest' });
const mine = async (timestamp?: number) => {
  const latest = await chainHead();
  await rpc.call('evm_mine', [{ timestamp: timestamp ?? Number(latest.timestamp) + 1 }]);
};
/** The storage slot of MockUSDC's balanceOf(`holder`): OpenZeppelin's ERC20 keeps its balances first. */
const balanceSlot = (holder: Address) =>
  keccak256(encodeAbiParameters([{ type: 'address' }, { type: 'uint256' }], [holder, 0n]));
const usdcBalance = (holder: Address) =>
  reader().readContract({
    address: deployment.usdc,
    abi: MockUSDC.abi,
    functionName: 'balanceOf',
    args: [holder],
  });

interface Storage {
  name: string;
  start(): Promise<void>;
  stop(): Promise<void>;
  options(): IndexStorageOptions;
}

const sqlite = (): Storage => {
  let path = '';
  return {
    name: 'sqlite',
    async start() {
      path = join(mkdtempSync(join(dir, 'sqlite-')), 'index.db');
    },
    stop: async () => undefined,
    options: () => ({ kind: 'sqlite', path }),
  };
};

const postgres = (): Storage => {
  let database: FreshDatabase | undefined;
  return {
    name: 'postgres',
    async start() {
      database = await freshDatabase();
    },
    stop: async () => database?.drop(),
    options: () => ({ kind: 'postgres', url: (database as FreshDatabase).url }),
  };
};

describe.each([
  { name: 'SQLite', make: sqlite },
  { name: 'PostgreSQL', make: postgres },
])('the index on $name', ({ make }) => {
  const storage = make();
  /** The chain as this storage's cases found it (anvil's snapshot id). */
  let untouched: Hex;
  let index: Indexer;
  const warnings: string[] = [];
  /** Each afterCommitTx call: the head it was given and the last block its transaction held. */
  const hooked: Array<{ head: number | undefined; inTx: number | null; committed: number | null }> =
    [];
  let hookFails = false;

  const lastBlock = async (sql: { get: SqlTransaction['get'] }) =>
    (await sql.get<{ n: number | null }>('SELECT MAX(number) AS n FROM blocks'))?.n ?? null;
  const stored = <T>(sql: string, ...params: Array<string | number>) =>
    index.query((on) => on.all<T>(sql, ...params));

  const open = (chainId = CHAIN_ID) =>
    createIndexer({
      storage: storage.options(),
      rpc,
      chainId,
      deployment,
      log: { warn: (line) => warnings.push(line), error: (line) => warnings.push(line) },
      afterCommitTx: async (tx, head: Checkpoint | undefined) => {
        hooked.push({
          head: head?.number,
          inTx: await lastBlock(tx),
          // What a reader sees meanwhile: the rows committed before this transaction.
          committed: await index.query(lastBlock),
        });
        if (hookFails) throw new Error('the hook failed');
      },
    });

  beforeAll(async () => {
    untouched = await rpc.call<Hex>('evm_snapshot');
    await storage.start();
    index = await open();
  });
  afterAll(async () => {
    await index?.close();
    await storage.stop();
    await rpc.call('evm_revert', [untouched]);
  });

  it('indexes the chain, each step one transaction that readers see only once committed', async () => {
    const before = index.checkpoint()?.number ?? null;
    await mine();
    await index.syncTo();
    const head = await chainHead();
    expect(index.checkpoint()).toEqual({
      number: Number(head.number),
      hash: head.hash,
      timestamp: Number(head.timestamp),
    });
    const [blocks] = await stored<{ n: number; top: number }>(
      'SELECT COUNT(*) AS n, MAX(number) AS top FROM blocks',
    );
    expect(blocks).toEqual({ n: Number(head.number), top: Number(head.number) });
    // The genesis deployed the vaults: their rows are derived.
    const vaults = await stored<{ address: string }>('SELECT address FROM vaults');
    expect(vaults.map((row) => row.address)).toContain(vault.toLowerCase());
    const [state] = await stored<{ balance: string }>(
      'SELECT balance FROM vault_states WHERE vault = ? ORDER BY block_number DESC LIMIT 1',
      vault.toLowerCase(),
    );
    expect(BigInt(state?.balance ?? -1)).toBe(await usdcBalance(vault));
    // The hook ran inside the step's transaction, which held the step's blocks; a reader saw
    // the blocks committed before it.
    expect(hooked.at(-1)).toEqual({
      head: Number(head.number),
      inTx: Number(head.number),
      committed: before,
    });
  });

  it('follows a reorg: the raw rows cut back and the rest derived again, in one transaction', async () => {
    const snapshot = await rpc.call<Hex>('evm_snapshot');
    await mine();
    await mine();
    await index.syncTo();
    const replaced = index.checkpoint();
    await rpc.call('evm_revert', [snapshot]);
    const latest = await chainHead();
    for (let i = 1; i <= 3; i++) await mine(Number(latest.timestamp) + 100 * i);
    hooked.length = 0;
    await index.syncTo();
    expect(warnings.some((line) => line.startsWith('the chain reorganised'))).toBe(true);
    const head = await chainHead();
    expect(index.checkpoint()?.hash).toBe(head.hash);
    expect(index.checkpoint()?.hash).not.toBe(replaced?.hash);
    const from = Number(latest.number) + 1;
    const rows = await stored<{ number: number; hash: string }>(
      'SELECT number, hash FROM blocks WHERE number >= ? ORDER BY number',
      from,
    );
    const onChain = await Promise.all(
      [0, 1, 2].map((i) => reader().getBlock({ blockNumber: BigInt(from + i) })),
    );
    expect(rows).toEqual(
      onChain.map((block) => ({ number: Number(block.number), hash: block.hash })),
    );
    // The rollback, back to the common ancestor, then the step of the new blocks.
    expect(hooked.map((call) => call.head)).toEqual([Number(latest.number), Number(head.number)]);
  });

  it('takes a vault’s state from the chain where no event told of it (a correction)', async () => {
    const added = 7_000_000n;
    const balance = await usdcBalance(vault);
    await rpc.call('anvil_setStorageAt', [
      deployment.usdc,
      balanceSlot(vault),
      toHex(balance + added, { size: 32 }),
    ]);
    await mine();
    await index.syncTo();
    const at = index.checkpoint();
    if (!at) throw new Error('nothing indexed');
    expect(await index.reconcile(await index.observe(at))).toEqual([vault.toLowerCase()]);
    const [state] = await stored<{ balance: string; block_number: number }>(
      'SELECT balance, block_number FROM vault_states WHERE vault = ? ORDER BY block_number DESC LIMIT 1',
      vault.toLowerCase(),
    );
    expect(state).toEqual({ balance: String(balance + added), block_number: at.number });
    const [correction] = await stored<{ n: number }>(
      'SELECT COUNT(*) AS n FROM vault_corrections WHERE block_number = ?',
      at.number,
    );
    expect(correction?.n).toBe(1);
    expect(await index.reconcile(await index.observe(at))).toEqual([]);
  });

  it('rolls a step back whole when its transaction fails, and indexes it on the next try', async () => {
    const before = index.checkpoint();
    // A block that moves the vault's balance: the failed step applied it to the vault's state
    // the projection keeps in memory.
    await rpc.call('anvil_setBalance', [vault, toHex(10n ** 18n)]);
    await rpc.call('anvil_impersonateAccount', [vault]);
    await rpc.call('eth_sendTransaction', [
      {
        from: vault,
        to: deployment.usdc,
        data: encodeFunctionData({
          abi: MockUSDC.abi,
          functionName: 'transfer',
          args: [deployment.usdc, 1_000_000n],
        }),
      },
    ]);
    await rpc.call('anvil_stopImpersonatingAccount', [vault]);
    await mine();
    const balance = await usdcBalance(vault);
    hookFails = true;
    await expect(index.syncTo()).rejects.toThrow('the hook failed');
    hookFails = false;
    expect(index.checkpoint()).toEqual(before);
    const [blocks] = await stored<{ top: number }>('SELECT MAX(number) AS top FROM blocks');
    expect(blocks?.top).toBe(before?.number);
    await index.syncTo();
    expect(index.checkpoint()?.hash).toBe((await chainHead()).hash);
    // What the projection kept in memory of the rolled-back step was forgotten: the transfer
    // is counted once.
    const [state] = await stored<{ balance: string }>(
      'SELECT balance FROM vault_states WHERE vault = ? ORDER BY block_number DESC LIMIT 1',
      vault.toLowerCase(),
    );
    expect(BigInt(state?.balance ?? -1)).toBe(balance);
  });

  it('goes on from its stored checkpoint after a restart', async () => {
    const before = index.checkpoint();
    await index.close();
    hooked.length = 0;
    index = await open();
    expect(index.checkpoint()).toEqual(before);
    await mine();
    await index.syncTo();
    // One step: the new block alone.
    expect(hooked).toHaveLength(1);
    expect(hooked[0]?.head).toBe((before?.number ?? 0) + 1);
  });

  it('starts afresh when it was built for another chain', async () => {
    await index.close();
    warnings.length = 0;
    index = await open(CHAIN_ID + 1);
    expect(index.checkpoint()).toBeUndefined();
    expect(await stored('SELECT number FROM blocks')).toEqual([]);
    expect(await stored('SELECT address FROM vaults')).toEqual([]);
    await index.close();
    index = await open();
    expect(index.checkpoint()).toBeUndefined();
    await index.syncTo();
    expect(index.checkpoint()?.hash).toBe((await chainHead()).hash);
  });

  if (storage.name === 'sqlite') {
    it('copies index.db and puts a copy back in place', async () => {
      const copied = index.checkpoint();
      const copy = join(dir, `copy-${Date.now()}.db`);
      expect(await index.copyTo(copy)).toBe(true);
      await mine();
      await index.syncTo();
      expect(index.checkpoint()?.number).toBe((copied?.number ?? 0) + 1);
      await index.replaceWith(copy);
      expect(index.checkpoint()).toEqual(copied);
      // The transitional synchronous readers read the read-only connection.
      expect(() => index.db.exec('DELETE FROM blocks')).toThrow(/readonly/);
      await index.syncTo();
      expect(index.checkpoint()?.hash).toBe((await chainHead()).hash);
    });
  } else {
    it('refuses file copies and synchronous reads, which are SQLite’s', async () => {
      const before = index.checkpoint();
      await expect(index.copyTo(join(dir, 'never.db'))).rejects.toThrow(
        /is SQLite's: on PostgreSQL a snapshot copies the index's tables into a schema/,
      );
      await expect(index.replaceWith(join(dir, 'never.db'))).rejects.toThrow(/is SQLite's/);
      expect(() => index.db).toThrow(/PostgreSQL is read through the Sql interface/);
      // Nothing was replaced: the index goes on from where it was.
      expect(index.checkpoint()).toEqual(before);
      await mine();
      await index.syncTo();
      expect(index.checkpoint()?.number).toBe((before?.number ?? 0) + 1);
    });

    it('refuses an index schema made by a newer agentctl, touching nothing', async () => {
      const setVersion = async (version: number) => {
        const client = new pg.Client({
          connectionString: (storage.options() as { url: string }).url,
        });
        await client.connect();
        try {
          await client.query('UPDATE sandbox_index.schema_version SET version = $1', [version]);
        } finally {
          await client.end();
        }
      };
      const before = index.checkpoint();
      await index.close();
      await setVersion(99);
      try {
        await expect(open()).rejects.toThrow(
          new RegExp(
            `index schema \\(sandbox_index\\) is version 99, newer than this agentctl knows \\(${INDEX_MIGRATIONS.length}\\); upgrade agentctl`,
          ),
        );
      } finally {
        await setVersion(INDEX_MIGRATIONS.length);
        index = await open();
      }
      expect(index.checkpoint()).toEqual(before);
    });

    it('answers INDEX_UNAVAILABLE while its database cannot be reached, and rebuilds nothing', async () => {
      const url = new URL((storage.options() as { url: string }).url);
      let cut: TcpCut | undefined;
      let through: Indexer | undefined;
      try {
        cut = await startTcpCut({ host: url.hostname, port: Number(url.port) });
        url.port = String(cut.port);
        await index.close();
        through = await createIndexer({
          storage: { kind: 'postgres', url: url.toString() },
          rpc,
          chainId: CHAIN_ID,
          deployment,
          log: { warn: (line) => warnings.push(line), error: (line) => warnings.push(line) },
        });
        const before = through.checkpoint();
        expect(before?.hash).toBe((await chainHead()).hash);
        cut.cut();
        const read = through.query((sql) => sql.all('SELECT number FROM blocks'));
        await expect(read).rejects.toBeInstanceOf(IndexUnavailableError);
        await expect(read).rejects.toThrow(/cannot be reached.*once the connection is back/);
        await mine();
        await expect(through.syncTo()).rejects.toThrow();
        expect(through.failure()).toBeUndefined();
        expect(through.checkpoint()).toEqual(before);
        cut.restore();
        await through.syncTo();
        expect(through.checkpoint()?.hash).toBe((await chainHead()).hash);
        const [blocks] = await through.query((sql) =>
          sql.all<{ n: number }>('SELECT COUNT(*) AS n FROM blocks'),
        );
        expect(blocks?.n).toBe(through.checkpoint()?.number);
      } finally {
        await through?.close();
        await cut?.close();
        index = await open();
      }
    });
  }
});
