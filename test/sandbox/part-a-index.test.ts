import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import pg from 'pg';
import {
  type Abi,
  type Address,
  createPublicClient,
  createWalletClient,
  type Hex,
  http,
  keccak256,
  toHex,
} from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CHAIN_ID, VAULT_IDS } from '../../src/api/schemas/index.ts';
import { agentPassesOf, balancesOf } from '../../src/sandbox/chain/agent-wallets.ts';
import { type AnvilProcess, startAnvil } from '../../src/sandbox/chain/anvil.ts';
import {
  AgentGovernor,
  AgentPass,
  MockUSDC,
  ProtocolToken,
  SandboxVault,
  StrategyRegistryV3,
} from '../../src/sandbox/chain/contracts/artifacts.ts';
import type { Deployment } from '../../src/sandbox/chain/deployment.ts';
import { GENESIS } from '../../src/sandbox/chain/genesis.ts';
import { activeProposals, votesCastBy } from '../../src/sandbox/chain/governance.ts';
import type { SandboxChain } from '../../src/sandbox/chain/index.ts';
import { createRpcClient, type RpcClient } from '../../src/sandbox/chain/rpc.ts';
import {
  strategiesOf,
  strategyCountOf,
  totalStrategies,
} from '../../src/sandbox/chain/strategies.ts';
import { listVaults, positionsOf, totalDeposited } from '../../src/sandbox/chain/vaults.ts';
import { GENESIS_KEYS } from '../../src/sandbox/chain/wallets.ts';
import { createIndexer, type Indexer } from '../../src/sandbox/indexer/indexer.ts';
import {
  indexedActiveProposals,
  indexedAgentPassesOf,
  indexedBalances,
  indexedPositions,
  indexedStrategiesOf,
  indexedStrategyCount,
  indexedTotalDeposited,
  indexedTotalStrategies,
  indexedVaults,
  indexedVotesCastBy,
} from '../../src/sandbox/indexer/part-a-reads.ts';
import { INDEX_MIGRATIONS, INDEX_SCHEMA } from '../../src/sandbox/indexer/schema-postgres.ts';
import { type FreshDatabase, freshDatabase } from '../helpers/postgres.ts';

/**
 * Part A's reads answered from the index (part-a-reads.ts) answer what the chain's own views
 * answer (chain/*.ts, the reads these routes made before), on both storages: after proposals,
 * votes, AgentPass mints and transfers (ERC721Enumerable's order), strategies and deposits;
 * and again after a reorg, whose rollback derives the tables again from the raw rows kept.
 * One anvil (the sandbox's genesis, mining on demand) for the file; each storage's cases put
 * the chain back as they found it.
 */
let dir: string;
let anvil: AnvilProcess;
let rpc: RpcClient;
const deployment = GENESIS.deployment as unknown as Deployment;
const treasury = privateKeyToAccount(GENESIS_KEYS.treasury);
/** A second holder, that passes a token on (the faucet's key: it holds ETH for gas). */
const holder = privateKeyToAccount(GENESIS_KEYS.faucet);
const stranger = `0x${'5e'.repeat(20)}` as Address;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'agentctl-part-a-index-'));
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

const publicClient = () => createPublicClient({ transport: http(anvil.rpcUrl) });
const latest = () => publicClient().getBlock({ blockTag: 'latest' });
const mine = async (seconds = 60) => {
  const block = await latest();
  await rpc.call('evm_mine', [{ timestamp: Number(block.timestamp) + seconds }]);
};

/** Sends one call from `from` and mines it in a block of its own. */
async function send(
  from: typeof treasury,
  address: Address,
  abi: Abi,
  functionName: string,
  args: readonly unknown[],
): Promise<void> {
  const wallet = createWalletClient({ account: from, transport: http(anvil.rpcUrl) });
  // A call that would revert says why here.
  await publicClient().simulateContract({ account: from, address, abi, functionName, args });
  const hash = await wallet.writeContract({
    address,
    abi,
    functionName,
    args,
    chain: null,
    gas: 1_000_000n,
  } as Parameters<typeof wallet.writeContract>[0]);
  await mine(12);
  const receipt = await publicClient().getTransactionReceipt({ hash });
  if (receipt.status !== 'success') throw new Error(`${functionName} reverted`);
}

/** A plain ETH transfer (no event tells of it), mined in a block of its own. */
async function sendEth(from: typeof treasury, to: Address, value: bigint): Promise<void> {
  const wallet = createWalletClient({ account: from, transport: http(anvil.rpcUrl) });
  const hash = await wallet.sendTransaction({ to, value, chain: null });
  await mine(12);
  const receipt = await publicClient().getTransactionReceipt({ hash });
  if (receipt.status !== 'success') throw new Error('the transfer reverted');
}

/** The chain's views, as the routes read them before: what the index must answer. */
function chainViews(): SandboxChain {
  let now = 0;
  return {
    get publicClient() {
      return publicClient();
    },
    deployment,
    // activeProposals' "now": the latest block's time (the sandbox clock is not ahead here).
    nowSeconds: () => now,
    setNow: (at: number) => {
      now = at;
    },
  } as unknown as SandboxChain;
}

const postgres = () => {
  let database: FreshDatabase | undefined;
  return {
    async start() {
      database = await freshDatabase();
      return { kind: 'postgres' as const, url: database.url };
    },
    stop: async () => database?.drop(),
  };
};
const sqlite = () => ({
  async start() {
    return { kind: 'sqlite' as const, path: join(mkdtempSync(join(dir, 'sqlite-')), 'index.db') };
  },
  stop: async () => undefined,
});

describe.each([
  { name: 'SQLite', make: sqlite },
  { name: 'PostgreSQL', make: postgres },
])('Part A reads from the index on $name', ({ make }) => {
  const storage = make();
  let untouched: Hex;
  let index: Indexer;
  const warnings: string[] = [];
  const chain = chainViews();
  const owners = [treasury.address, holder.address, stranger];

  /** Every Part A read, from the index at its last block. */
  async function fromIndex() {
    const now = index.checkpoint()?.timestamp ?? 0;
    return index.query(async (sql) => ({
      vaults: await indexedVaults(sql, deployment, now),
      proposals: await indexedActiveProposals(sql, now),
      deposited: await indexedTotalDeposited(sql),
      strategies: await indexedTotalStrategies(sql),
      owners: await Promise.all(
        owners.map(async (owner) => ({
          positions: await indexedPositions(sql, deployment, now, owner),
          passes: await indexedAgentPassesOf(sql, deployment, owner),
          strategies: await indexedStrategiesOf(sql, deployment, owner),
          strategyCount: await indexedStrategyCount(sql, owner),
          votes: await indexedVotesCastBy(sql, owner),
          balances: await indexedBalances(sql, deployment, index.checkpoint()?.number ?? 0, owner),
        })),
      ),
    }));
  }

  /** The same reads, from the chain's views at its latest block (as the routes made them). */
  async function fromChain() {
    const block = await latest();
    (chain as unknown as { setNow(at: number): void }).setNow(Number(block.timestamp));
    return {
      vaults: await listVaults(chain),
      proposals: await activeProposals(chain),
      deposited: await totalDeposited(chain),
      strategies: Number(await totalStrategies(chain)),
      owners: await Promise.all(
        owners.map(async (owner) => ({
          positions: await positionsOf(chain, owner),
          passes: await agentPassesOf(chain, owner),
          strategies: (await strategiesOf(chain, owner)).map((s) => ({
            ...s,
            status: s.status,
          })),
          strategyCount: Number(await strategyCountOf(chain, owner)),
          votes: Number(await votesCastBy(chain, owner)),
          balances: await balancesOf(chain, owner).then(({ eth, usdc, tokens }) => ({
            eth,
            usdc,
            tokens,
          })),
        })),
      ),
    };
  }

  async function synced() {
    await index.syncTo();
    expect(index.checkpoint()?.hash).toBe((await latest()).hash);
  }

  beforeAll(async () => {
    untouched = await rpc.call<Hex>('evm_snapshot');
    index = await createIndexer({
      storage: await storage.start(),
      rpc,
      chainId: CHAIN_ID,
      deployment,
      log: { warn: (line) => warnings.push(line), error: (line) => warnings.push(line) },
    });
  });
  afterAll(async () => {
    await index?.close();
    await storage.stop();
    await rpc.call('evm_revert', [untouched]);
  });

  it('answers what the chain answers: proposals and votes, passes, strategies, deposits', async () => {
    const minted = Number(
      await publicClient().readContract({
        address: deployment.agent_pass,
        abi: AgentPass.abi,
        functionName: 'minted',
      }),
    );
    const vault = deployment.vaults.moderate;
    await send(treasury, deployment.governor, AgentGovernor.abi as Abi, 'propose', [
      'Raise the cap',
      'Raise the moderate vault cap to 2M USDC',
    ]);
    await send(treasury, deployment.governor, AgentGovernor.abi as Abi, 'propose', [
      'Second',
      'Another proposal',
    ]);
    await send(treasury, deployment.protocol_token, ProtocolToken.abi as Abi, 'mint', [
      treasury.address,
      10n ** 18n,
    ]);
    const proposalCount = await publicClient().readContract({
      address: deployment.governor,
      abi: AgentGovernor.abi,
      functionName: 'proposalCount',
    });
    await send(treasury, deployment.governor, AgentGovernor.abi as Abi, 'castVoteWithReason', [
      proposalCount,
      1,
      'yes',
    ]);
    await send(treasury, deployment.governor, AgentGovernor.abi as Abi, 'castVoteWithReason', [
      proposalCount - 1n,
      0,
      'no',
    ]);
    // Three passes to the holder, who hands the first on: ERC721Enumerable moves its last
    // token into the first's place.
    for (let i = 0; i < 3; i++) {
      await send(treasury, deployment.agent_pass, AgentPass.abi as Abi, 'mint', [holder.address]);
    }
    await send(holder, deployment.agent_pass, AgentPass.abi as Abi, 'transferFrom', [
      holder.address,
      stranger,
      BigInt(minted + 1),
    ]);
    await send(treasury, deployment.strategy_registry, StrategyRegistryV3.abi as Abi, 'submit', [
      keccak256(toHex('dna one')),
      'Momentum',
      'Buys strength, sells weakness',
      {
        maxPositionSizePercent: 10n,
        maxLeverage: 200n,
        stopLossPercent: 500n,
        slippageToleranceBps: 50n,
        correlationThreshold: 70n,
        velocityLimit: 1000n,
        flashLoansEnabled: false,
      },
    ]);
    await send(treasury, deployment.usdc, MockUSDC.abi as Abi, 'mint', [
      treasury.address,
      5_000_000_000n,
    ]);
    await send(treasury, deployment.usdc, MockUSDC.abi as Abi, 'approve', [vault, 5_000_000_000n]);
    await send(treasury, vault, SandboxVault.abi as Abi, 'deposit', [
      1_234_567_890n,
      treasury.address,
    ]);
    // Balances: ETH sent plainly (gas and value, which no event tells of), the protocol token
    // and USDC moved between accounts.
    await sendEth(treasury, stranger, 10n ** 15n);
    await send(treasury, deployment.protocol_token, ProtocolToken.abi as Abi, 'transfer', [
      holder.address,
      3n * 10n ** 17n,
    ]);
    await send(treasury, deployment.usdc, MockUSDC.abi as Abi, 'transfer', [stranger, 4_321n]);
    // Time passes: the vault's yield accrues in both answers alike.
    await mine(86_400);
    await synced();

    const indexed = await fromIndex();
    expect(indexed).toEqual(await fromChain());
    // What the case set out to show is there (not two empty answers alike).
    expect(indexed.proposals.length).toBeGreaterThanOrEqual(2);
    expect(indexed.proposals[0]?.votes).toEqual({ for: 1, against: 0, abstain: 0 });
    expect(indexed.owners[1]?.passes.map((pass) => pass.token_id)).toEqual([
      String(minted + 3),
      String(minted + 2),
    ]);
    expect(indexed.owners[2]?.passes.map((pass) => pass.token_id)).toEqual([String(minted + 1)]);
    expect(indexed.owners[0]?.strategies.at(-1)).toMatchObject({
      name: 'Momentum',
      description: 'Buys strength, sells weakness',
      status: 'shadow',
    });
    expect(indexed.owners[0]?.positions.positions.map((p) => p.vault_id)).toEqual(['moderate']);
    expect(indexed.owners[0]?.votes).toBe(2);
    expect(indexed.owners[2]?.balances).toEqual({ eth: 10n ** 15n, usdc: 4_321n, tokens: 0n });
    expect(indexed.owners[1]?.balances.tokens).toBeGreaterThanOrEqual(3n * 10n ** 17n);
  });

  it('answers the same after a reorg as the new chain does, and as before on the same chain', async () => {
    const before = await fromIndex();
    const fork = await rpc.call<Hex>('evm_snapshot');
    // A branch the index follows, then leaves: a vote, a pass moved, a strategy, a deposit.
    const proposalCount = await publicClient().readContract({
      address: deployment.governor,
      abi: AgentGovernor.abi,
      functionName: 'proposalCount',
    });
    await send(treasury, deployment.governor, AgentGovernor.abi as Abi, 'propose', [
      'Branch',
      'Only on the branch',
    ]);
    await send(treasury, deployment.governor, AgentGovernor.abi as Abi, 'castVoteWithReason', [
      proposalCount + 1n,
      2,
      'abstain',
    ]);
    const [first] = before.owners[1]?.passes ?? [];
    await send(holder, deployment.agent_pass, AgentPass.abi as Abi, 'transferFrom', [
      holder.address,
      stranger,
      BigInt(first?.token_id ?? 0),
    ]);
    await send(treasury, deployment.vaults.moderate, SandboxVault.abi as Abi, 'deposit', [
      1_000_000n,
      treasury.address,
    ]);
    await sendEth(holder, stranger, 10n ** 15n);
    await send(treasury, deployment.usdc, MockUSDC.abi as Abi, 'transfer', [stranger, 1n]);
    await synced();
    const branch = await fromIndex();
    expect(branch.proposals.length).toBe(before.proposals.length + 1);
    expect(branch.owners[2]?.passes.length).toBe(2);
    expect(branch.owners[2]?.balances.eth).toBe(2n * 10n ** 15n);
    expect(branch.owners[2]?.balances.usdc).toBe(4_322n);

    // The chain goes back to the fork and makes blocks with nothing in them: the index rolls
    // its raw rows back to the fork and derives every table again.
    await rpc.call('evm_revert', [fork]);
    const at = await latest();
    // More blocks than the branch made: the new chain is the longer one.
    for (let i = 1; i <= 8; i++) {
      await rpc.call('evm_mine', [{ timestamp: Number(at.timestamp) + 20 * i }]);
    }
    warnings.length = 0;
    await synced();
    expect(warnings.some((line) => line.startsWith('the chain reorganised'))).toBe(true);
    const after = await fromIndex();
    expect(after).toEqual(await fromChain());
    // Everything but the vaults' values (yield accrues with time) is as it was at the fork.
    const timeless = ({ vaults: _vaults, owners, ...rest }: typeof before) => ({
      ...rest,
      owners: owners.map(({ positions, ...owner }) => ({
        ...owner,
        shares: positions.positions.map((p) => p.shares),
      })),
    });
    expect(timeless(after)).toEqual(timeless(before));
  });
});

describe('Part A reads from an index of a chain read with eth_getLogs', () => {
  it("reads a strategy's description from its transaction, and known accounts' ETH after each step, which the logs do not carry", async () => {
    const untouched = await rpc.call<Hex>('evm_snapshot');
    const storage = sqlite();
    // A finality depth: blocks come from eth_getLogs, not from whole blocks and receipts.
    const index = await createIndexer({
      storage: await storage.start(),
      rpc,
      chainId: CHAIN_ID,
      deployment,
      finalityDepth: 1,
      log: { warn: () => {}, error: () => {} },
    });
    try {
      await send(treasury, deployment.strategy_registry, StrategyRegistryV3.abi as Abi, 'submit', [
        keccak256(toHex('dna from logs')),
        'From the logs',
        'Described in its submit call alone',
        {
          maxPositionSizePercent: 10n,
          maxLeverage: 200n,
          stopLossPercent: 500n,
          slippageToleranceBps: 50n,
          correlationThreshold: 70n,
          velocityLimit: 1000n,
          flashLoansEnabled: false,
        },
      ]);
      await mine();
      await index.syncTo();
      const indexed = await index.query((sql) =>
        indexedStrategiesOf(sql, deployment, treasury.address),
      );
      expect(indexed).toEqual(await strategiesOf(chainViews(), treasury.address));
      expect(indexed.at(-1)?.description).toBe('Described in its submit call alone');

      // An account the index knows (from a USDC mint) gets ETH plainly: no log tells of
      // it, and blocks are not read whole here; the known accounts are read after each step.
      const someone = `0x${'7a'.repeat(20)}` as Address;
      await send(treasury, deployment.usdc, MockUSDC.abi as Abi, 'mint', [someone, 1n]);
      await mine();
      await index.syncTo();
      await sendEth(treasury, someone, 10n ** 15n);
      await mine();
      await index.syncTo();
      const head = index.checkpoint()?.number ?? 0;
      expect(await index.query((sql) => indexedBalances(sql, deployment, head, someone))).toEqual({
        eth: await publicClient().getBalance({ address: someone, blockNumber: BigInt(head) }),
        usdc: 1n,
        tokens: 0n,
      });
      expect(head).toBeGreaterThan(0);
    } finally {
      await index.close();
      await storage.stop();
      await rpc.call('evm_revert', [untouched]);
    }
  });
});

describe('an index rebuilt from the start of a chain that no longer keeps old states', () => {
  it("holds each account's ETH as the chain does at its head", async () => {
    const untouched = await rpc.call<Hex>('evm_snapshot');
    const storage = sqlite();
    const someone = `0x${'3c'.repeat(20)}` as Address;
    let index: Indexer | undefined;
    try {
      await sendEth(treasury, someone, 10n ** 15n);
      await sendEth(holder, someone, 2n * 10n ** 15n);
      // anvil keeps the states of the last 64 blocks only (--prune-history 64).
      for (let i = 0; i < 80; i++) await mine(1);
      index = await createIndexer({
        storage: await storage.start(),
        rpc,
        chainId: CHAIN_ID,
        deployment,
        log: { warn: () => {}, error: () => {} },
      });
      await index.syncTo();
      const head = index.checkpoint()?.number ?? 0;
      expect(head).toBe(Number((await latest()).number));
      for (const account of [someone, treasury.address, holder.address]) {
        const indexed = await (index as Indexer).query((sql) =>
          indexedBalances(sql, deployment, head, account),
        );
        expect(indexed.eth).toBe(await publicClient().getBalance({ address: account }));
      }
    } finally {
      await index?.close();
      await storage.stop();
      await rpc.call('evm_revert', [untouched]);
    }
  });
});

describe('an index on PostgreSQL made before Part A was indexed (schema version 1)', () => {
  it('is emptied by the migration and indexed again from the chain, proposals and all', async () => {
    const database = await freshDatabase();
    const client = new pg.Client({ connectionString: database.url });
    await client.connect();
    let index: Indexer | undefined;
    try {
      // As an older agentctl left it: version 1's tables, with a block indexed in them.
      await client.query(`CREATE SCHEMA ${INDEX_SCHEMA}; SET search_path = ${INDEX_SCHEMA}`);
      await client.query(INDEX_MIGRATIONS[0] as string);
      await client.query(
        'CREATE TABLE schema_version (one BOOLEAN PRIMARY KEY DEFAULT true CHECK (one), version INTEGER NOT NULL)',
      );
      await client.query('INSERT INTO schema_version (version) VALUES (1)');
      await client.query(
        "INSERT INTO blocks (number, hash, parent_hash, timestamp) VALUES (1, '0x01', '0x00', 1)",
      );
      // Marked as this chain's (as the indexer names it), so that only the version empties it.
      const watched = [
        ...VAULT_IDS.map((id) => deployment.vaults[id]),
        deployment.usdc,
        deployment.strategy_registry,
        deployment.governor,
        deployment.agent_pass,
      ].map((address) => address.toLowerCase());
      await client.query("INSERT INTO index_meta (key, value) VALUES ('chain', $1)", [
        JSON.stringify({ chainId: CHAIN_ID, contracts: watched }),
      ]);
      const warnings: string[] = [];
      index = await createIndexer({
        storage: { kind: 'postgres', url: database.url },
        rpc,
        chainId: CHAIN_ID,
        deployment,
        log: { warn: (line) => warnings.push(line), error: (line) => warnings.push(line) },
      });
      // Nothing of the old rows is kept: the chain is indexed from its start.
      expect(index.checkpoint()).toBeUndefined();
      const { rows } = await client.query('SELECT version FROM schema_version');
      expect(rows).toEqual([{ version: INDEX_MIGRATIONS.length }]);
      await index.syncTo();
      expect(index.checkpoint()?.hash).toBe((await latest()).hash);
      const now = index.checkpoint()?.timestamp ?? 0;
      const chain = chainViews();
      (chain as unknown as { setNow(at: number): void }).setNow(now);
      expect(await index.query((sql) => indexedActiveProposals(sql, now))).toEqual(
        await activeProposals(chain),
      );
    } finally {
      await index?.close();
      await client.end();
      await database.drop();
    }
  });
});
