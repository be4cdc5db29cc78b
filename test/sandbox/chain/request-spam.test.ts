import {
  type Address,
  encodeFunctionData,
  type Hex,
  maxUint256,
  parseEventLogs,
  parseGwei,
} from 'viem';
import { describe, expect, it } from 'vitest';
import { CHAIN_ID } from '../../../src/api/schemas/index.ts';
import { ConfigurableVault, MockUSDC } from '../../../src/sandbox/chain/contracts/artifacts.ts';
import { createRpcClient, type RpcClient } from '../../../src/sandbox/chain/rpc.ts';
import { type ChainReader, call, chainAgent, useChainSandbox } from '../../helpers/chain.ts';
import { admin, newAccount, type TestSandbox } from '../../helpers/sandbox.ts';

/**
 * Someone floods the ERC-7540 vault with tiny requests for random controllers over the RPC
 * URL: requests the sandbox fulfils but no one ever claims. The agents' own requests must not
 * wait behind them.
 */
let sandbox: TestSandbox;
let reader: ChainReader;
let rpc: RpcClient;
useChainSandbox((started, chainReader) => {
  sandbox = started;
  reader = chainReader;
  rpc = createRpcClient(sandbox.chain.rpcUrl);
});

/** Three looks of the fulfiller's worth (it fulfils up to 400 per vault and look). */
const SPAM = 1200;

async function until(condition: () => boolean | Promise<boolean>): Promise<void> {
  while (!(await condition())) await new Promise((resolve) => setTimeout(resolve, 50));
}

/** Signs and sends `SPAM` requestDeposit(1, random controller) calls from a funded account. */
async function spamRequests(vault: Address): Promise<void> {
  const spammer = newAccount();
  const funded = await admin(sandbox.app, 'POST', '/sandbox/fund', {
    address: spammer.address,
    usdc: 1,
    eth: 10,
  });
  expect(funded.statusCode, funded.body).toBe(200);
  const fees = { maxFeePerGas: parseGwei('10'), maxPriorityFeePerGas: 0n };
  const raws: Hex[] = [
    await spammer.signTransaction({
      type: 'eip1559',
      chainId: CHAIN_ID,
      nonce: 0,
      to: sandbox.chain.deployment.usdc,
      data: encodeFunctionData({
        abi: MockUSDC.abi,
        functionName: 'approve',
        args: [vault, maxUint256],
      }),
      gas: 100_000n,
      ...fees,
    }),
  ];
  for (let i = 1; i <= SPAM; i++) {
    raws.push(
      await spammer.signTransaction({
        type: 'eip1559',
        chainId: CHAIN_ID,
        nonce: i,
        to: vault,
        data: encodeFunctionData({
          abi: ConfigurableVault.abi,
          functionName: 'requestDeposit',
          args: [1n, newAccount().address, spammer.address],
        }),
        gas: 300_000n,
        ...fees,
      }),
    );
  }
  for (let i = 0; i < raws.length; i += 500) {
    const sent = await rpc.batch(
      raws.slice(i, i + 500).map((raw) => ({ method: 'eth_sendRawTransaction', params: [raw] })),
    );
    expect(sent.every((result) => result.ok)).toBe(true);
  }
  // The sandbox mines what others send.
  await until(
    async () =>
      Number(await rpc.call<Hex>('eth_getTransactionCount', [spammer.address, 'latest'])) ===
      raws.length,
  );
}

describe('ERC-7540 requests flooded in by someone else', () => {
  it("fulfils and claims an agent's due request first, whatever others have queued", async () => {
    const vault = sandbox.chain.deployment.vaults.configurable;
    const agent = await chainAgent(sandbox);
    // An hour's delay: every request below becomes due at the same moment, the clock advance.
    const delay = await admin(sandbox.app, 'POST', '/sandbox/vaults/fulfillment-delay', {
      vault_id: 'configurable',
      seconds: 3600,
    });
    expect(delay.statusCode, delay.body).toBe(200);
    await spamRequests(vault);
    const deposit = await call(sandbox, agent.apiKey, 'POST', '/api/v1/agent/vault/deposit', {
      vault_id: 'configurable',
      amount_usdc: 3,
    });
    expect(deposit.statusCode, deposit.body).toBe(200);
    const requestId = BigInt(deposit.json().request_id);
    // The agent's request is the newest of them all.
    expect(requestId).toBe(BigInt(SPAM + 1));
    const advanced = await admin(sandbox.app, 'POST', '/sandbox/clock/advance', { seconds: 3600 });
    expect(advanced.statusCode, advanced.body).toBe(200);

    // The agent's shares are claimed into its wallet…
    await until(
      async () =>
        (await reader.readContract({
          address: vault,
          abi: ConfigurableVault.abi,
          functionName: 'balanceOf',
          args: [agent.agentAddress],
        })) > 0n,
    );
    // …and every flooded request is fulfilled too, in the end.
    await until(
      async () =>
        (await reader.readContract({
          address: vault,
          abi: ConfigurableVault.abi,
          functionName: 'fulfillableAt',
          args: [BigInt(SPAM)],
        })) === 0n,
    );
    const events = parseEventLogs({
      abi: ConfigurableVault.abi,
      eventName: 'DepositFulfilled',
      logs: await reader.getLogs({ address: vault, fromBlock: 0n }),
    });
    const blockOf = (id: bigint) =>
      events.find((event) => event.args.requestId === id)?.blockNumber;
    const agentsBlock = blockOf(requestId) as bigint;
    const lastFlooded = events
      .filter((event) => event.args.requestId <= BigInt(SPAM))
      .reduce((last, event) => (event.blockNumber > last ? event.blockNumber : last), 0n);
    // The agent's request, made last, was fulfilled before the flood was worked off.
    expect(agentsBlock).toBeLessThan(lastFlooded);
  }, 120_000);
});
