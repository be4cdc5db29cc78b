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
  http,
  keccak256,
  toHex,
} from 'viem';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CHAIN_ID } from '../../../src/api/schemas/index.ts';
import { type AnvilProcess, startAnvil } from '../../../src/sandbox/chain/anvil.ts';
import { MockUSDC, SandboxVault } from '../../../src/sandbox/chain/contracts/artifacts.ts';
import type { Deployment } from '../../../src/sandbox/chain/deployment.ts';
import { GENESIS } from '../../../src/sandbox/chain/genesis.ts';
import type { SandboxChain } from '../../../src/sandbox/chain/index.ts';
import { createRpcClient, type RpcClient } from '../../../src/sandbox/chain/rpc.ts';
import type { Live } from '../../../src/sandbox/graphql/live.ts';
import { publishCommits } from '../../../src/sandbox/graphql/publish.ts';
import { IndexUnavailableError } from '../../../src/sandbox/indexer/failure.ts';
import {
  createIndexer,
  type IndexCommit,
  type Indexer,
} from '../../../src/sandbox/indexer/indexer.ts';
import { createDataQueries } from '../../../src/sandbox/indexer/queries.ts';
import { INDEX_SCHEMA, INDEX_TABLES } from '../../../src/sandbox/indexer/schema-postgres.ts';
import type { Store } from '../../../src/sandbox/store/index.ts';
import { openPostgresStore } from '../../../src/sandbox/store/postgres.ts';
import { recordCommits } from '../../../src/sandbox/team/commit-feed.ts';
import {
  openReplicaIndex,
  type ReplicaIndex,
  replicaIndexReads,
} from '../../../src/sandbox/team/replica-index.ts';
import { createWriterLock, type WriterLock } from '../../../src/sandbox/team/writer-lock.ts';
import { type FreshDatabase, freshDatabase } from '../../helpers/postgres.ts';
import { startTcpCut, type TcpCut } from '../../helpers/tcp-cut.ts';

/**
 * The writer's index on PostgreSQL with its commit feed, and a replica's view following it:
 * every commit the writer's subscribers are told reaches the replica's, in order, through
 * NOTIFY and, when notices are lost (a listener killed, a network cut), through the feed; a
 * replica further behind than the feed keeps is told one reorg-like commit; one read is one
 * state. One anvil (the sandbox's genesis) and one database for the file; deposits are real.
 */
const KEEP = 6;
const deployment = GENESIS.deployment as unknown as Deployment;
const vault = deployment.vaults.moderate as Address;
const depositor = '0x00000000000000000000000000000000000d3b05' as Address;

let dir: string;
let anvil: AnvilProcess;
let rpc: RpcClient;
let database: FreshDatabase;
let admin: pg.Client;
let writer: Indexer;
let lock: WriterLock;
let store: Awaited<ReturnType<typeof openPostgresStore>>;
const told: IndexCommit[] = [];
const cleanups: Array<() => Promise<unknown>> = [];

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'agentctl-replica-index-'));
  const state = join(dir, 'genesis.json');
  writeFileSync(state, gunzipSync(Buffer.from(GENESIS.state.slice(2), 'hex')));
  anvil = await startAnvil({ stateDir: dir, mining: 'manual', loadState: state });
  rpc = createRpcClient(anvil.rpcUrl);
  await rpc.call('anvil_setTime', [GENESIS.block_timestamp]);
  // The depositor: ETH for gas, USDC written into MockUSDC's balances (slot 0 of OpenZeppelin's
  // ERC20), and the vault approved once.
  await rpc.call('anvil_setBalance', [depositor, toHex(10n ** 20n)]);
  await rpc.call('anvil_setStorageAt', [
    deployment.usdc,
    keccak256(encodeAbiParameters([{ type: 'address' }, { type: 'uint256' }], [depositor, 0n])),
    toHex(10n ** 15n, { size: 32 }),
  ]);
  await rpc.call('anvil_impersonateAccount', [depositor]);
  await send(deployment.usdc, {
    abi: MockUSDC.abi,
    functionName: 'approve',
    args: [vault, 10n ** 15n],
  });
  database = await freshDatabase();
  admin = new pg.Client({ connectionString: database.url });
  await admin.connect();
  lock = createWriterLock({ database: database.name, onLost: () => undefined });
  store = await openPostgresStore(database.url, lock.hooks);
  writer = await createIndexer({
    storage: { kind: 'postgres', url: database.url },
    rpc,
    chainId: CHAIN_ID,
    deployment,
    log: { warn: () => undefined, error: () => undefined },
    // As a writer on PostgreSQL does: each index commit fenced by the writer lock.
    afterCommitTx: recordCommits({ keep: KEEP, fence: (tx) => lock.fence(tx) }),
  });
  writer.onCommit((commit) => told.push(commit));
  await writer.syncTo();
});
afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup().catch(() => undefined);
  await writer?.close();
  await lock?.release();
  await store?.close();
  await admin?.end();
  await database?.drop();
  await anvil?.stop();
  rmSync(dir, { recursive: true, force: true });
});

const chainHead = () =>
  createPublicClient({ transport: http(anvil.rpcUrl) }).getBlock({ blockTag: 'latest' });

/** Sends a call from the depositor (impersonated), mined with the next block. */
async function send(to: Address, call: Parameters<typeof encodeFunctionData>[0]): Promise<void> {
  await rpc.call('eth_sendTransaction', [
    { from: depositor, to, data: encodeFunctionData(call), gas: toHex(500_000) },
  ]);
  const latest = await chainHead();
  await rpc.call('evm_mine', [{ timestamp: Number(latest.timestamp) + 1 }]);
}

/** A deposit into the vault, indexed and committed by the writer. */
async function deposit(amount = 1_000_000n): Promise<void> {
  await send(vault, { abi: SandboxVault.abi, functionName: 'deposit', args: [amount, depositor] });
  await writer.syncTo();
}

/** A commit as comparable data: its vaults sorted. */
const plain = (commit: IndexCommit) => ({
  vaults: [...commit.vaults].sort(),
  transactions: commit.transactions,
  reorg: commit.reorg,
});

/** A replica following the writer, with what it published and a way to wait for it. */
async function follow(url = database.url) {
  const published: IndexCommit[] = [];
  const waiters: Array<{ count: number; open: () => void }> = [];
  const replica = await openReplicaIndex({ url, log: { warn: () => undefined } });
  cleanups.push(() => replica.close());
  replica.onCommit((commit) => {
    published.push(commit);
    for (const waiter of waiters.splice(0)) {
      if (published.length >= waiter.count) waiter.open();
      else waiters.push(waiter);
    }
  });
  return {
    replica,
    published,
    /** Resolves once `count` commits were published (the test's timeout bounds the wait). */
    publishedCount(count: number): Promise<void> {
      return new Promise((open) => {
        if (published.length >= count) open();
        else waiters.push({ count, open });
      });
    },
  };
}

const seqNow = async () =>
  Number(
    (await admin.query('SELECT max(seq) AS seq FROM sandbox_index.index_commits')).rows[0].seq,
  );

describe('a replica following the writer’s index', () => {
  let followed: Awaited<ReturnType<typeof follow>>;

  beforeAll(async () => {
    followed = await follow();
  });

  it('publishes every commit the writer’s subscribers were told, in order, deposits included', async () => {
    const from = told.length;
    for (let i = 0; i < 3; i++) await deposit(BigInt(1_000_000 * (i + 1)));
    await followed.publishedCount(3);
    const mine = told.slice(from);
    expect(mine).toHaveLength(3);
    // Each deposit is a transaction of the vault.
    for (const commit of mine) {
      expect([...commit.vaults]).toContain(vault.toLowerCase());
      expect(commit.transactions.length).toBeGreaterThan(0);
    }
    expect(followed.published.map(plain)).toEqual(mine.map(plain));
    const { replica } = followed;
    expect(replica.version()).toBe(await seqNow());
    expect(replica.checkpoint()).toEqual(writer.checkpoint());
    expect(replica.failure()).toBeUndefined();
    // What the replica reads is what the writer committed.
    const transactions = (sql: Parameters<Parameters<ReplicaIndex['read']>[0]>[0]) =>
      sql.all('SELECT block_number, log_index, amount FROM transactions ORDER BY 1, 2');
    expect(await replica.read(transactions)).toEqual(await writer.query(transactions));
    // The feed keeps its bound.
    const rows = await admin.query('SELECT count(*)::int AS n FROM sandbox_index.index_commits');
    expect(rows.rows[0].n).toBeLessThanOrEqual(KEEP);
  });

  it('answers the data API’s queries as the writer does', async () => {
    await deposit();
    await followed.replica.catchUp();
    // The chain and the store are not read by these answers (a replica has no chain).
    const chain = { deployment } as unknown as SandboxChain;
    const store = {} as Store;
    const onWriter = createDataQueries({
      chain,
      store,
      index: {
        read: (work) => writer.query(work),
        version: () => writer.version(),
        checkpoint: () => writer.checkpoint(),
        failure: () => writer.failure(),
      },
    });
    const onReplica = replicaIndexReads(followed.replica, { chain, store });
    const summaries = await onReplica.queries.summaries();
    expect(summaries.length).toBeGreaterThan(0);
    expect(summaries).toEqual(await onWriter.summaries());
    expect(onReplica.now()).toBe(writer.checkpoint()?.timestamp);
    expect(await onReplica.hasActivity(depositor)).toBe(true);
  });

  it('feeds the replica’s GraphQL subscriptions: a deposit indexed by the writer is an event on the replica', async () => {
    const chain = { deployment } as unknown as SandboxChain;
    const reads = replicaIndexReads(followed.replica, { chain, store: {} as Store });
    const events: Array<{ topic: string; payload: Record<string, Record<string, unknown>> }> = [];
    let sent!: () => void;
    const transactionSent = new Promise<void>((open) => {
      sent = open;
    });
    // Every topic listened to, as a socket subscribed to each would.
    const live = {
      listened: () => true,
      listenedUnder: () => true,
      publish(topic: string, payload: Record<string, Record<string, unknown>>) {
        events.push({ topic, payload });
        if (topic === 'transactions:*') sent();
      },
    } as unknown as Live;
    const stop = publishCommits(reads, reads.queries, live);
    try {
      await deposit(2_500_000n);
      await transactionSent;
    } finally {
      stop();
    }
    const created = events.find((event) => event.topic === 'transactions:*')?.payload
      .transactionCreated;
    expect(created).toMatchObject({ type: 'DEPOSIT', status: 'FULFILLED' });
    expect(String(created?.vault).toLowerCase()).toBe(vault.toLowerCase());
    expect(String(created?.user).toLowerCase()).toBe(depositor);
    expect(events.map((event) => event.topic)).toContain(`vault:${vault.toLowerCase()}`);
  });

  it('catches up after its listening connection is killed, skipping no commit', async () => {
    const sessions = async () =>
      (
        await admin.query<{ pid: number }>(
          `SELECT pid FROM pg_stat_activity
            WHERE application_name = 'agentctl listener' AND datname = current_database()`,
        )
      ).rows.map((row) => row.pid);
    const [killed] = await sessions();
    expect(killed).toBeDefined();
    await admin.query('SELECT pg_terminate_backend($1)', [killed]);
    const before = followed.published.length;
    const from = told.length;
    for (let i = 0; i < 3; i++) await deposit();
    await followed.publishedCount(before + 3);
    expect(followed.published.slice(before).map(plain)).toEqual(told.slice(from).map(plain));
    expect(followed.replica.version()).toBe(await seqNow());
    // It listens again, on a new session.
    await deposit();
    await followed.publishedCount(before + 4);
    expect(await sessions()).not.toContain(killed);
  });

  it('awaitFeed reads the feed up to its last commit at the call, without waiting for a notice', async () => {
    // A commit in the feed that no NOTIFY announces (inserted directly): only awaitFeed's own
    // read of the feed finds it, as a read on a replica must before it answers.
    const before = followed.published.length;
    const { rows } = await admin.query<{ seq: string }>(
      `INSERT INTO sandbox_index.index_commits (block, reorg, vaults, transactions, at_ms)
       VALUES (NULL, false, '[]', '[]', 0) RETURNING seq`,
    );
    await followed.replica.awaitFeed(5_000);
    expect(followed.published.length).toBe(before + 1);
    expect(followed.replica.version()).toBe(Number(rows[0]?.seq));
    // Caught up: nothing to wait for.
    await followed.replica.awaitFeed(1);
  });

  it('awaitBlock gives up with INDEX_UNAVAILABLE when the block never comes', async () => {
    const far = (followed.replica.checkpoint()?.number ?? 0) + 1_000;
    await expect(followed.replica.awaitBlock(far, 200)).rejects.toThrow(
      /this replica has not read block \d+ of the index within 200 ms/,
    );
  });

  it('publishes a reorganisation of the chain as the writer’s subscribers were told it', async () => {
    const snapshot = await rpc.call<string>('evm_snapshot');
    await deposit();
    // The deposit's commit, published before the reorganisation is.
    await followed.replica.catchUp();
    await rpc.call('evm_revert', [snapshot]);
    const latest = await chainHead();
    for (let i = 1; i <= 2; i++) {
      await rpc.call('evm_mine', [{ timestamp: Number(latest.timestamp) + 100 * i }]);
    }
    const before = followed.published.length;
    const from = told.length;
    await writer.syncTo();
    const mine = told.slice(from);
    expect(mine.filter((commit) => commit.reorg)).toHaveLength(1);
    await followed.publishedCount(before + mine.length);
    expect(followed.published.slice(before).map(plain)).toEqual(mine.map(plain));
    expect(followed.replica.checkpoint()).toEqual(writer.checkpoint());
  });

  it('reads one state in one read while the writer commits', async () => {
    const lastBlock = 'SELECT max(number) AS n FROM blocks';
    const seen = await followed.replica.read(async (sql) => {
      const first = await sql.get<{ n: number }>(lastBlock);
      await deposit();
      const second = await sql.get<{ n: number }>(lastBlock);
      return { first: first?.n, second: second?.n };
    });
    expect(seen.second).toBe(seen.first);
    const after = await followed.replica.read((sql) => sql.get<{ n: number }>(lastBlock));
    expect(after?.n).toBe((seen.first ?? 0) + 1);
    // And it writes nothing.
    await expect(followed.replica.read((sql) => sql.run('DELETE FROM blocks'))).rejects.toThrow(
      /never writes/,
    );
  });

  it('starts from the feed’s current commit when it restarts', async () => {
    await deposit();
    const restarted = await follow();
    expect(restarted.replica.version()).toBe(await seqNow());
    expect(restarted.replica.checkpoint()).toEqual(writer.checkpoint());
    const from = told.length;
    await deposit();
    await restarted.publishedCount(1);
    expect(restarted.published.map(plain)).toEqual(told.slice(from).map(plain));
    await restarted.replica.close();
  });
  it('is told that every vault changed when the writer’s index is replaced (emptied), and reads the index indexed again', async () => {
    await followed.replica.catchUp();
    const before = followed.published.length;
    const version = followed.replica.version();
    await writer.replaceWith(undefined);
    await followed.publishedCount(before + 1);
    expect(followed.published.slice(before).map(plain)).toEqual([
      { vaults: [...writer.vaults.keys()].sort(), transactions: [], reorg: true },
    ]);
    expect(followed.replica.version()).toBeGreaterThan(version);
    expect(followed.replica.checkpoint()).toBeUndefined();
    await writer.syncTo();
    await followed.replica.catchUp();
    expect(followed.replica.checkpoint()).toEqual(writer.checkpoint());
  });
  it('is told that every vault changed when a restore replaces the writer’s index tables', async () => {
    await followed.replica.catchUp();
    const before = followed.published.length;
    // A restore's transaction on another connection (snapshots/database.ts): here, of a
    // snapshot taken before anything was indexed.
    await writer.replacedBy(async () => {
      await admin.query(
        `TRUNCATE ${INDEX_TABLES.map((table) => `${INDEX_SCHEMA}.${table}`).join(', ')}`,
      );
    });
    await followed.publishedCount(before + 1);
    expect(followed.published.slice(before).map(plain)).toEqual([
      { vaults: [...writer.vaults.keys()].sort(), transactions: [], reorg: true },
    ]);
    expect(followed.replica.checkpoint()).toBeUndefined();
    expect(writer.checkpoint()).toBeUndefined();
    await writer.syncTo();
    await followed.replica.catchUp();
    expect(followed.replica.checkpoint()).toEqual(writer.checkpoint());
  });
});

describe('a replica cut off from the database', () => {
  let cut: TcpCut;
  let followed: Awaited<ReturnType<typeof follow>>;

  beforeAll(async () => {
    const url = new URL(database.url);
    cut = await startTcpCut({ host: url.hostname, port: Number(url.port) });
    cleanups.push(() => cut.close());
    url.port = String(cut.port);
    followed = await follow(url.toString());
  });

  it('answers INDEX_UNAVAILABLE and says why while cut; once back, is told one reorg-like commit for what the feed no longer keeps, then the rest', async () => {
    cut.cut();
    const read = followed.replica.read((sql) => sql.all('SELECT number FROM blocks'));
    await expect(read).rejects.toBeInstanceOf(IndexUnavailableError);
    await expect(read).rejects.toThrow(/its database cannot be reached/);
    expect(followed.replica.failure()).toMatch(/its database cannot be reached/);
    const seqBefore = followed.replica.version();
    const from = told.length;
    // More commits than the feed keeps: the first ones are purged before the replica reads.
    for (let i = 0; i < KEEP + 2; i++) await deposit();
    const missed = told.slice(from);
    expect(missed).toHaveLength(KEEP + 2);
    cut.restore();
    await followed.publishedCount(1 + KEEP);
    const [everything, ...rest] = followed.published;
    expect(everything && plain(everything)).toEqual({
      vaults: [...writer.vaults.keys()].sort(),
      transactions: [],
      reorg: true,
    });
    // The commits the feed kept, in order; none twice.
    expect(rest.map(plain)).toEqual(missed.slice(2).map(plain));
    expect(followed.replica.version()).toBe(seqBefore + KEEP + 2);
    expect(followed.replica.failure()).toBeUndefined();
    expect(await followed.replica.read((sql) => sql.get('SELECT 1 AS one'))).toEqual({ one: 1 });
  });
});
