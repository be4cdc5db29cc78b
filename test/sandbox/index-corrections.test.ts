import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import {
  type Address,
  createPublicClient,
  encodeAbiParameters,
  type Hex,
  http,
  keccak256,
  toHex,
} from 'viem';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CHAIN_ID } from '../../src/api/schemas/index.ts';
import { type AnvilProcess, startAnvil } from '../../src/sandbox/chain/anvil.ts';
import { MockUSDC, SandboxVault } from '../../src/sandbox/chain/contracts/artifacts.ts';
import type { Deployment } from '../../src/sandbox/chain/deployment.ts';
import { GENESIS } from '../../src/sandbox/chain/genesis.ts';
import { createRpcClient, type RpcClient } from '../../src/sandbox/chain/rpc.ts';
import { createIndexer, type Indexer } from '../../src/sandbox/indexer/indexer.ts';
import { indexTime } from '../../src/sandbox/indexer/reads.ts';
import { vaultSummaries } from '../../src/sandbox/indexer/vaults.ts';
import { damageRootPages } from '../helpers/index-damage.ts';

/**
 * The index's corrections from the chain (indexer.ts reconcile), on a plain anvil holding the
 * sandbox's genesis: a vault's USDC balance set with anvil_setStorageAt is taken from the
 * chain, and the correction outlives a reorg that makes the index derive its tables again.
 */
let dir: string;
let anvil: AnvilProcess;
let rpc: RpcClient;
let index: Indexer;
const warnings: string[] = [];
const deployment = GENESIS.deployment as unknown as Deployment;
const vault = deployment.vaults.moderate as Address;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'agentctl-corrections-'));
  const state = join(dir, 'genesis.json');
  writeFileSync(state, gunzipSync(Buffer.from(GENESIS.state.slice(2), 'hex')));
  anvil = await startAnvil({ stateDir: dir, mining: 'manual', loadState: state });
  rpc = createRpcClient(anvil.rpcUrl);
  // anvil refuses to mine below its own start time; the genesis is older than that.
  await rpc.call('anvil_setTime', [GENESIS.block_timestamp]);
  index = await createIndexer({
    storage: { kind: 'sqlite', path: join(dir, 'index.db') },
    rpc,
    chainId: CHAIN_ID,
    deployment,
    log: { warn: (message) => warnings.push(message), error: (message) => warnings.push(message) },
  });
  await index.syncTo();
});
afterAll(async () => {
  await index?.close();
  await anvil?.stop();
  rmSync(dir, { recursive: true, force: true });
});

const reader = () => createPublicClient({ transport: http(anvil.rpcUrl) });
/** Reconciles the index with the chain at the index's last block (nothing is mined meanwhile). */
const reconcile = async () => {
  const at = index.checkpoint();
  if (!at) throw new Error('nothing indexed');
  return index.reconcile(await index.observe(at));
};
const tvl = async () =>
  (await index.query((sql) => vaultSummaries(sql, index.vaults, indexTime(index)))).find(
    (summary) => summary.id === 'moderate',
  )?.tvl;
const mine = async (timestamp?: number) => {
  const latest = await reader().getBlock({ blockTag: 'latest' });
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

const totalAssets = () =>
  reader().readContract({ address: vault, abi: SandboxVault.abi, functionName: 'totalAssets' });

describe('the index’s corrections from the chain', () => {
  it('takes a vault’s state from the chain where no event told of it, through a reorg', async () => {
    const added = 1_000_000n * 10n ** 6n;
    const balance = await usdcBalance(vault);
    await rpc.call('anvil_setStorageAt', [
      deployment.usdc,
      balanceSlot(vault),
      toHex(balance + added, { size: 32 }),
    ]);
    expect(await usdcBalance(vault)).toBe(balance + added);
    await mine();
    await index.syncTo();
    expect(await tvl()).toBeLessThan(added);
    expect(await reconcile()).toEqual([vault.toLowerCase()]);
    expect(await tvl()).toBe(await totalAssets());
    expect(warnings).toHaveLength(1);
    // Nothing more to correct.
    expect(await reconcile()).toEqual([]);

    // A reorg above the corrected block: the index cuts back and derives its tables again.
    const snapshot = await rpc.call<Hex>('evm_snapshot');
    await mine();
    await mine();
    await index.syncTo();
    await rpc.call('evm_revert', [snapshot]);
    const latest = await reader().getBlock({ blockTag: 'latest' });
    for (let i = 1; i <= 3; i++) await mine(Number(latest.timestamp) + 100 * i);
    await index.syncTo();
    expect(warnings.some((line) => line.startsWith('the chain reorganised'))).toBe(true);
    const head = await reader().getBlock({ blockTag: 'latest' });
    expect(index.checkpoint()?.hash).toBe(head.hash);
    // The index's tvl at its head's time is the chain's totalAssets there.
    expect(await tvl()).toBe(await totalAssets());
    expect(await tvl()).toBeGreaterThan(added);
  });

  it('corrects a block the index has since moved past, and names the fields that differed', async () => {
    const added = 5_000_000n;
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
    const observed = await index.observe(at);
    await mine();
    await mine();
    await index.syncTo();
    warnings.length = 0;
    expect(await index.reconcile(observed)).toEqual([vault.toLowerCase()]);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toContain(`at block ${at.number}`);
    expect(warnings[0]).toContain(`balance ${balance} → ${balance + added}`);
    expect(await tvl()).toBe(await totalAssets());
    expect(await reconcile()).toEqual([]);
  });
});

describe('a damaged index.db met while following a reorg', () => {
  it('marks the index failed, so that it answers 503 and is rebuilt', async () => {
    const snapshot = await rpc.call<Hex>('evm_snapshot');
    await mine();
    await mine();
    await index.syncTo();
    await rpc.call('evm_revert', [snapshot]);
    // The chain is now below the index's last block: syncTo goes back first (followBack),
    // and finds the damage looking for the common ancestor.
    damageRootPages(join(dir, 'index.db'), ['blocks', 'sqlite_autoindex_blocks_1']);
    await expect(index.syncTo()).rejects.toThrow(/malformed/);
    expect(index.failure()).toMatch(/^index\.db failed/);
  });
});
