import { type Address, encodeAbiParameters, type Hex, keccak256, parseGwei, toHex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { describe, expect, it } from 'vitest';
import { CHAIN_ID } from '../../../src/api/schemas/index.ts';
import { MockUSDC, SandboxVault } from '../../../src/sandbox/chain/contracts/artifacts.ts';
import { createRpcClient, type RpcClient, toQuantity } from '../../../src/sandbox/chain/rpc.ts';
import { GENESIS_KEYS } from '../../../src/sandbox/chain/wallets.ts';
import { type ChainReader, call, chainAgent, useChainSandbox } from '../../helpers/chain.ts';
import { admin, newAccount, type TestSandbox } from '../../helpers/sandbox.ts';

/**
 * Anyone on the machine can drive the sandbox's anvil over its RPC URL (anvil has no auth):
 * these tests do so directly, as a third party would, and check that the sandbox's own writes
 * go on regardless.
 */
let sandbox: TestSandbox;
let reader: ChainReader;
let rpc: RpcClient;
/** The chain's and the index's warnings, as serve would log them. */
const warnings: string[] = [];
useChainSandbox(
  (started, chainReader) => {
    sandbox = started;
    reader = chainReader;
    // The URL GET /sandbox/info answers as rpc_url.
    rpc = createRpcClient(sandbox.chain.rpcUrl);
  },
  { chainLog: { info() {}, warn: (message) => warnings.push(message), error() {} } },
);

/** Waits until `condition` holds, looking every 20 ms (the test's timeout bounds the wait). */
async function until(condition: () => boolean | Promise<boolean>): Promise<void> {
  while (!(await condition())) await new Promise((resolve) => setTimeout(resolve, 20));
}

const fund = (address: Address) =>
  admin(sandbox.app, 'POST', '/sandbox/fund', { address, usdc: 5, eth: 0.01 });

/** The sandbox has logged (and so taken as its own) every block up to the node's head. */
async function logged(): Promise<void> {
  const head = Number(await rpc.call<Hex>('eth_blockNumber'));
  await until(async () => (await sandbox.store.chainLog.find(head)) !== undefined);
}

describe("the treasury's public key", () => {
  it('resyncs its nonce and sends again once, when someone else used the key', async () => {
    const someone = newAccount().address;
    // The treasury has sent before, so its wallet holds its next nonce.
    expect((await fund(someone)).statusCode).toBe(200);
    const treasury = privateKeyToAccount(GENESIS_KEYS.treasury);
    const nonce = Number(
      await rpc.call<Hex>('eth_getTransactionCount', [treasury.address, 'pending']),
    );
    const raw = await treasury.signTransaction({
      type: 'eip1559',
      chainId: CHAIN_ID,
      nonce,
      to: someone,
      value: 1n,
      gas: 21_000n,
      maxFeePerGas: parseGwei('10'),
      maxPriorityFeePerGas: 0n,
    });
    const hash = await rpc.call<Hex>('eth_sendRawTransaction', [raw]);
    // The sandbox mines what others send; the nonce it held is now taken.
    await until(async () => (await rpc.call('eth_getTransactionReceipt', [hash])) !== null);

    const again = await fund(someone);
    expect(again.statusCode, again.body).toBe(200);
    expect(again.json().usdc_balance_raw).toBe('10000000');
  });
});

describe('a base fee raised by someone else', () => {
  it('does not stop writes when a block was mined at 100 gwei', async () => {
    await rpc.call('anvil_setNextBlockBaseFeePerGas', [toQuantity(Number(parseGwei('100')))]);
    await rpc.call('evm_mine');
    await logged();
    const response = await fund(newAccount().address);
    expect(response.statusCode, response.body).toBe(200);
    // And the next block is the sandbox's own again, at a fee its writes can pay.
    const after = await fund(newAccount().address);
    expect(after.statusCode, after.body).toBe(200);
    const block = await reader.getBlock({ blockTag: 'latest' });
    expect(block.baseFeePerGas).toBeLessThanOrEqual(parseGwei('10'));
    expect(warnings).toContainEqual(
      expect.stringMatching(
        /^the next block's base fee had been raised above what the sandbox's writes pay/,
      ),
    );
  });

  it('does not stop writes when the next block is set to 100 gwei', async () => {
    await rpc.call('anvil_setNextBlockBaseFeePerGas', [toQuantity(Number(parseGwei('100')))]);
    const response = await fund(newAccount().address);
    expect(response.statusCode, response.body).toBe(200);
  });
});

const DAY = 86_400;

/** Mines a block 30 days past the later of the sandbox clock and the chain's head. */
async function mineAhead(): Promise<number> {
  const head = await reader.getBlock({ blockTag: 'latest' });
  const ahead = Math.max(sandbox.clock.nowSeconds(), Number(head.timestamp)) + 30 * DAY;
  await rpc.call('evm_mine', [{ timestamp: ahead }]);
  return ahead;
}

const advance = (seconds: number) =>
  admin(sandbox.app, 'POST', '/sandbox/clock/advance', { seconds });

describe('a block mined ahead of the sandbox clock', () => {
  it('moves the clock up to it, and a clock advance moves chain time on from there', async () => {
    const ahead = await mineAhead();
    await until(() => sandbox.clock.nowSeconds() >= ahead);
    const advanced = await advance(3600);
    expect(advanced.statusCode, advanced.body).toBe(200);
    const block = await reader.getBlock({ blockTag: 'latest' });
    expect(Number(block.timestamp)).toBeGreaterThanOrEqual(ahead + 3600);
    expect(sandbox.clock.nowSeconds()).toBeGreaterThanOrEqual(ahead + 3600);
    expect(warnings).toContainEqual(
      expect.stringMatching(/^block \d+ carries a time \d+ s ahead of the sandbox clock/),
    );
  });

  it('moves chain time by the advance also when the advance comes before the sandbox saw the block', async () => {
    const ahead = await mineAhead();
    const advanced = await advance(3600);
    expect(advanced.statusCode, advanced.body).toBe(200);
    const block = await reader.getBlock({ blockTag: 'latest' });
    expect(Number(block.timestamp)).toBeGreaterThanOrEqual(ahead + 3600);
    expect(advanced.json().now).toBeGreaterThanOrEqual(ahead + 3600);
  });

  it('lets an ERC-7540 request with no delay be fulfilled and claimed', async () => {
    const delay = await admin(sandbox.app, 'POST', '/sandbox/vaults/fulfillment-delay', {
      vault_id: 'configurable',
      seconds: 0,
    });
    expect(delay.statusCode, delay.body).toBe(200);
    const agent = await chainAgent(sandbox);
    await mineAhead();
    const deposit = await call(sandbox, agent.apiKey, 'POST', '/api/v1/agent/vault/deposit', {
      vault_id: 'configurable',
      amount_usdc: 2,
    });
    expect(deposit.statusCode, deposit.body).toBe(200);
    expect(deposit.json().status).toBe('pending');
    // The fulfiller fulfils it, and claims the shares into the agent's wallet.
    await until(
      async () =>
        (await reader.readContract({
          address: sandbox.chain.deployment.vaults.configurable,
          abi: SandboxVault.abi,
          functionName: 'balanceOf',
          args: [agent.agentAddress],
        })) > 0n,
    );
  });
});

describe("a vault's USDC balance changed outside transactions", () => {
  it('is compared with the index at the next checkpoint, and the index corrected', async () => {
    const agent = await chainAgent(sandbox);
    const deposit = await call(sandbox, agent.apiKey, 'POST', '/api/v1/agent/vault/deposit', {
      vault_id: 'moderate',
      amount_usdc: 50,
    });
    expect(deposit.statusCode, deposit.body).toBe(200);
    const vault = sandbox.chain.deployment.vaults.moderate;
    const usdc = sandbox.chain.deployment.usdc;
    const balance = await reader.readContract({
      address: usdc,
      abi: MockUSDC.abi,
      functionName: 'balanceOf',
      args: [vault],
    });
    // The slot of balanceOf(vault) in MockUSDC's storage: the mapping's slot is found by
    // looking, as someone poking at the chain would.
    const slotOf = (mapping: number) =>
      keccak256(
        encodeAbiParameters([{ type: 'address' }, { type: 'uint256' }], [vault, BigInt(mapping)]),
      );
    let slot: Hex | undefined;
    for (let mapping = 0; mapping < 16 && !slot; mapping++) {
      const held = await rpc.call<Hex>('eth_getStorageAt', [usdc, slotOf(mapping), 'latest']);
      if (BigInt(held) === balance) slot = slotOf(mapping);
    }
    expect(slot).toBeDefined();
    const added = 1_000_000n * 10n ** 6n;
    await rpc.call('anvil_setStorageAt', [usdc, slot, toHex(balance + added, { size: 32 })]);
    // A block after the change, so that the checkpoint has something new to hold.
    expect((await fund(newAccount().address)).statusCode).toBe(200);

    const checkpoint = await admin(sandbox.app, 'POST', '/sandbox/checkpoint');
    expect(checkpoint.statusCode, checkpoint.body).toBe(200);
    const totalAssets = await reader.readContract({
      address: vault,
      abi: SandboxVault.abi,
      functionName: 'totalAssets',
    });
    const indexed = await sandbox.app.inject({ url: `/v1/vaults/${vault}` });
    expect(indexed.statusCode).toBe(200);
    expect(BigInt(indexed.json().tvl)).toBe(totalAssets);
    expect(warnings).toContainEqual(
      expect.stringMatching(
        new RegExp(`^vault ${vault} at block \\d+: the index had tvl \\d+, the chain \\d+ `),
      ),
    );
    // Only that vault: every other vault's events add up to what the chain holds (the
    // ERC-7540 vault's requests, fulfilments and claims above included).
    expect(warnings.filter((line) => line.startsWith('vault '))).toHaveLength(1);
    expect(totalAssets).toBeGreaterThan(added);
  });
});
