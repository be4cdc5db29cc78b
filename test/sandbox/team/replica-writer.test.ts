import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { IndexCommit } from '../../../src/sandbox/indexer/indexer.ts';
import {
  openReplicaIndex,
  type ReplicaIndex,
  replicaIndexReads,
} from '../../../src/sandbox/team/replica-index.ts';
import { call, chainAgent } from '../../helpers/chain.ts';
import { type FreshDatabase, freshDatabase } from '../../helpers/postgres.ts';
import { createTestSandbox, type TestSandbox } from '../../helpers/sandbox.ts';

/**
 * The commit feed as the runtime wires it: a sandbox kept in PostgreSQL (the real app, its
 * anvil, its index in the database) records each index commit for replicas, and a replica's
 * index following that database hears of a Part A deposit as the writer's subscribers do, and
 * answers the data API's reads of it as the writer does.
 */
let database: FreshDatabase;
let sandbox: TestSandbox;
let replica: ReplicaIndex;

beforeAll(async () => {
  database = await freshDatabase();
  sandbox = await createTestSandbox({ database: database.url, checkpointAfterMs: 3_600_000 });
  replica = await openReplicaIndex({ url: database.url, log: { warn: () => undefined } });
});
afterAll(async () => {
  await replica?.close();
  await sandbox?.close();
  await database?.drop();
});

const plain = (commit: IndexCommit) => ({
  vaults: [...commit.vaults].sort(),
  transactions: commit.transactions,
  reorg: commit.reorg,
});

describe('a replica of a sandbox kept in PostgreSQL', () => {
  it('hears of a Part A deposit as the writer’s subscribers do, and reads it as the writer does', async () => {
    const agent = await chainAgent(sandbox);
    await replica.catchUp();
    const onWriter: IndexCommit[] = [];
    const onReplica: IndexCommit[] = [];
    const stopWriter = sandbox.runtime.index.onCommit((commit) => onWriter.push(commit));
    let heard!: () => void;
    const deposited = new Promise<void>((open) => {
      heard = open;
    });
    replica.onCommit((commit) => {
      onReplica.push(commit);
      if (commit.transactions.length > 0) heard();
    });
    try {
      const deposit = await call(sandbox, agent.apiKey, 'POST', '/api/v1/agent/vault/deposit', {
        vault_id: 'moderate',
        amount_usdc: 12.5,
      });
      expect(deposit.statusCode).toBe(200);
      await deposited;
    } finally {
      stopWriter();
    }
    // Up to the deposit's commit (what the background poll commits after it may not have
    // reached both yet).
    const upToDeposit = (commits: IndexCommit[]) =>
      commits.slice(0, commits.findIndex((commit) => commit.transactions.length > 0) + 1);
    expect(upToDeposit(onWriter)).not.toEqual([]);
    expect(upToDeposit(onReplica).map(plain)).toEqual(upToDeposit(onWriter).map(plain));
    const reads = replicaIndexReads(replica, { chain: sandbox.chain, store: sandbox.store });
    const address = agent.agentAddress;
    const page = { limit: 10, offset: 0 };
    const onReplicaTransactions = await reads.queries.transactions(address, page);
    expect(onReplicaTransactions.transactions).toHaveLength(1);
    expect(onReplicaTransactions).toEqual(
      await sandbox.runtime.index.queries.transactions(address, page),
    );
    expect(await reads.queries.positions(address)).toEqual(
      await sandbox.runtime.index.queries.positions(address),
    );
  });
});
