import { type Address, createWalletClient, erc20Abi, type Hash, http, parseUnits } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { baseSepolia } from 'viem/chains';
import { describe, expect, it } from 'vitest';
import { VAULT_IDS } from '../../src/api/schemas/values.ts';
import { ConfigurableVault, SandboxVault } from '../../src/sandbox/chain/contracts/artifacts.ts';
import { type ChainReader, call, chainAgent, useChainSandbox } from '../helpers/chain.ts';
import { admin, type TestSandbox } from '../helpers/sandbox.ts';
import { adminInProcess, useSnapshot } from '../helpers/snapshot.ts';

let sandbox: TestSandbox;
let reader: ChainReader;
useChainSandbox((started, chain) => {
  sandbox = started;
  reader = chain;
});
/**
 * The sandbox as deployed: empty vaults, the ERC-7540 vault's fulfilment delay at its default
 * (3600 s), no agents, no transactions. Tests that read totals or the delay restore it first.
 */
const deployed = useSnapshot(
  adminInProcess(() => sandbox),
  'deployed',
);

const DAY = 86_400;

const get = async (url: string) => {
  const response = await sandbox.app.inject({ url });
  // biome-ignore lint/suspicious/noExplicitAny: bodies are checked field by field
  return { status: response.statusCode, body: response.json() as any };
};

/** A vault's numbers read with our own client, at the latest block. */
async function vaultOnchain(vault: Address) {
  const read = (functionName: string, args: unknown[] = []) =>
    reader.readContract({ address: vault, abi: SandboxVault.abi, functionName, args } as never);
  return {
    totalAssets: (await read('totalAssets')) as bigint,
    totalSupply: (await read('totalSupply')) as bigint,
    pricePerShare: (await read('convertToAssets', [10n ** 6n])) as bigint,
  };
}

const advance = async (seconds: number) => {
  const response = await admin(sandbox.app, 'POST', '/sandbox/clock/advance', { seconds });
  expect(response.statusCode).toBe(200);
};

const deposit = async (apiKey: string, vault_id: string, amount_usdc: number) => {
  const response = await call(sandbox, apiKey, 'POST', '/api/v1/agent/vault/deposit', {
    vault_id,
    amount_usdc,
  });
  expect(response.statusCode).toBe(200);
  return response.json();
};

/** Polls `read` until `done` holds (the fulfiller works in the background), at most `ms`. */
async function eventually<T>(read: () => Promise<T>, done: (value: T) => boolean, ms = 5000) {
  const until = Date.now() + ms;
  for (;;) {
    const value = await read();
    if (done(value) || Date.now() > until) return value;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

describe('GET /v1/vaults and /v1/vaults/:address', () => {
  it('lists the six vaults with tvl equal to the chain’s totalAssets()', async () => {
    await deployed.restore();
    const agent = await chainAgent(sandbox);
    await deposit(agent.apiKey, 'aggressive', 250);
    await advance(DAY);
    const { status, body } = await get('/v1/vaults');
    expect(status).toBe(200);
    expect(body.vaults).toHaveLength(VAULT_IDS.length);
    let total = 0n;
    for (const id of VAULT_IDS) {
      const address = sandbox.chain.deployment.vaults[id];
      const item = body.vaults.find((vault: { address: string }) => vault.address === address);
      const chain = await vaultOnchain(address);
      total += chain.totalAssets;
      expect(item).toMatchObject({
        tvl: chain.totalAssets.toString(),
        tvlUsd: Number(chain.totalAssets) / 1e6,
        isERC7540: id === 'configurable',
        fulfillmentDelay: id === 'configurable' ? 3600 : null,
        riskLevel: expect.stringMatching(/^(conservative|moderate|aggressive)$/),
        // No strategy is live on the deployed sandbox.
        strategies: 0,
      });
    }
    expect(body.totalTvl).toBe(total.toString());
    // A day of yield on 250 USDC at 15 % a year, exactly as the vault computes it.
    const aggressive = body.vaults.find(
      (vault: { address: string }) => vault.address === sandbox.chain.deployment.vaults.aggressive,
    );
    expect(BigInt(aggressive.tvl)).toBeGreaterThan(250_000_000n);
    expect(aggressive.apy).toBeGreaterThan(14.9);
    expect(aggressive.apy).toBeLessThanOrEqual(15);

    // Of the aggressive vaults (aggressive and inverse), only the one deposited into holds any.
    const aggressiveRisk = await get('/v1/vaults?riskLevel=aggressive&orderBy=tvl_desc');
    expect(aggressiveRisk.body.vaults.map((vault: { address: string }) => vault.address)).toEqual([
      sandbox.chain.deployment.vaults.aggressive,
      sandbox.chain.deployment.vaults.inverse,
    ]);
    const filtered = await get('/v1/vaults?riskLevel=aggressive&orderBy=tvl_desc&minTvl=1');
    expect(filtered.body.vaults.map((vault: { address: string }) => vault.address)).toEqual([
      sandbox.chain.deployment.vaults.aggressive,
    ]);
  });

  it('details a vault with the chain’s totalSupply() and convertToAssets(10^6)', async () => {
    // The week's APY below is this test's deposit's alone.
    await deployed.restore();
    const agent = await chainAgent(sandbox);
    await deposit(agent.apiKey, 'moderate', 100);
    await advance(2 * DAY);
    const address = sandbox.chain.deployment.vaults.moderate;
    const { status, body } = await get(`/v1/vaults/${address.toLowerCase()}`);
    expect(status).toBe(200);
    const chain = await vaultOnchain(address);
    expect(body).toMatchObject({
      address,
      name: 'Moderate USDC Vault',
      symbol: 'avMOD',
      asset: sandbox.chain.deployment.usdc,
      tvl: chain.totalAssets.toString(),
      totalShares: chain.totalSupply.toString(),
      pricePerShare: chain.pricePerShare.toString(),
      fees: { management: 0, performance: 0, hurdle: 0 },
      isERC7540: false,
      fulfillmentDelay: null,
    });
    expect(body.apy.current).toBeGreaterThan(7.9);
    // Two of the last seven days earned 8 %: about 8 × 2/7 annualised over the week.
    expect(body.apy['7d']).toBeGreaterThan(0);
    expect(body.apy['7d']).toBeLessThan(8);
    expect(body.apy.inception).toBeGreaterThan(0);

    const unknown = await get(`/v1/vaults/0x${'12'.repeat(20)}`);
    expect(unknown.status).toBe(404);
    expect(unknown.body.error.code).toBe('VAULT_NOT_FOUND');
    const bad = await get('/v1/vaults/0xnothex');
    expect(bad.status).toBe(400);
    expect(bad.body.error.code).toBe('INVALID_ADDRESS');
  });
});

describe('GET /v1/vaults/:address/history', () => {
  it('gains one daily point per day the clock advances, the last one the current state', async () => {
    const address = sandbox.chain.deployment.vaults.conservative;
    const agent = await chainAgent(sandbox);
    await deposit(agent.apiKey, 'conservative', 500);
    const before = await get(`/v1/vaults/${address}/history?period=all&interval=1d`);
    expect(before.status).toBe(200);
    await advance(3 * DAY);
    const after = await get(`/v1/vaults/${address}/history?period=all&interval=1d`);
    expect(after.body.points.length).toBe(before.body.points.length + 3);
    const times = after.body.points.map((point: { timestamp: string }) =>
      Date.parse(point.timestamp),
    );
    expect([...times].sort((a, b) => a - b)).toEqual(times);
    // Daily points end at midnight UTC, the last at the last block.
    for (const time of times.slice(0, -1)) expect(time % (DAY * 1000)).toBe(0);
    const last = after.body.points.at(-1);
    const chain = await vaultOnchain(address);
    expect(last.tvl).toBe(chain.totalAssets.toString());
    expect(last.pricePerShare).toBe(chain.pricePerShare.toString());
    expect(last.apy).toBeGreaterThan(0);
    // The vault was created with the genesis: no point before that day.
    const created = (await get('/v1/vaults')).body.vaults.find(
      (vault: { address: string }) => vault.address === address,
    ).createdAt;
    expect(times[0]).toBeGreaterThan(Date.parse(created));
    expect(times[0] - Date.parse(created)).toBeLessThanOrEqual(DAY * 1000);

    const week = await get(`/v1/vaults/${address}/history?period=7d&interval=4h`);
    expect(week.body).toMatchObject({ address, period: '7d', interval: '4h' });
    expect(week.body.points.length).toBeGreaterThanOrEqual(42);
    expect(week.body.points.length).toBeLessThanOrEqual(43);
    const defaults = await get(`/v1/vaults/${address}/history`);
    expect(defaults.body).toMatchObject({ period: '30d', interval: '1d' });
  });

  it.each([
    ['period=2d', 'period'],
    ['interval=1m', 'interval'],
  ])('refuses %s as INVALID_PARAMETER naming it', async (query, parameter) => {
    const address = sandbox.chain.deployment.vaults.conservative;
    const response = await get(`/v1/vaults/${address}/history?${query}`);
    expect(response.status).toBe(400);
    expect(response.body.error).toMatchObject({
      code: 'INVALID_PARAMETER',
      details: { parameter },
    });
  });
});

describe('the ERC-7540 vault', () => {
  it('takes a Part A deposit as a pending request, fulfils it after the delay, and claims it for the agent', async () => {
    // At the default delay, with no other request in flight.
    await deployed.restore();
    // An earlier request, due 30 s (of sandbox time) before this test's: once it has been
    // fulfilled and claimed, the fulfiller has looked at the later one with the clock past the
    // earlier one's time, and must have left it pending.
    const earlier = await chainAgent(sandbox);
    const first = await deposit(earlier.apiKey, 'configurable', 5);
    await advance(30);
    const agent = await chainAgent(sandbox);
    const vault = sandbox.chain.deployment.vaults.configurable;
    const answer = await deposit(agent.apiKey, 'configurable', 40);
    expect(answer.fulfillable_at).toBeGreaterThanOrEqual(first.fulfillable_at + 30);
    expect(answer).toMatchObject({
      status: 'pending',
      shares_balance: '0',
      request_id: expect.stringMatching(/^\d+$/),
      fulfillable_at: expect.any(Number),
    });
    const history = `/v1/users/${agent.agentAddress}/transactions`;
    const pending = (await get(history)).body.transactions;
    expect(pending).toMatchObject([
      { type: 'deposit_request', status: 'pending', amount: '40000000', shares: null },
    ]);
    expect((await get(`/v1/users/${agent.agentAddress}/positions`)).body.positions).toMatchObject([
      { vault, shares: '0', pendingDeposit: '40000000', claimableDeposit: '0' },
    ]);
    // Not before the delay has passed in sandbox time: the clock moves to 10 s past the
    // earlier request's time, 20 s before this one's.
    await advance(first.fulfillable_at + 10 - sandbox.clock.nowSeconds());
    const earlierHistory = `/v1/users/${earlier.agentAddress}/transactions`;
    const earlierDone = await eventually(
      async () => (await get(earlierHistory)).body.transactions,
      (txs) => txs.length === 2 && txs.every((tx: { status: string }) => tx.status === 'claimed'),
    );
    expect(earlierDone.map((tx: { status: string }) => tx.status)).toEqual(['claimed', 'claimed']);
    expect((await get(history)).body.transactions[0].status).toBe('pending');

    await advance(3600);
    const claimed = await eventually(
      async () => (await get(history)).body.transactions,
      (txs) => txs.length === 2 && txs.every((tx: { status: string }) => tx.status === 'claimed'),
    );
    expect(claimed).toMatchObject([
      { type: 'claim', status: 'claimed', amount: '40000000' },
      { type: 'deposit_request', status: 'claimed', amount: '40000000' },
    ]);
    const shares = (await reader.readContract({
      address: vault,
      abi: ConfigurableVault.abi,
      functionName: 'balanceOf',
      args: [agent.agentAddress],
    })) as bigint;
    expect(shares).toBeGreaterThan(0n);
    expect(claimed[0].shares).toBe(shares.toString());
    expect(claimed[1].shares).toBe(shares.toString());
    const [position] = (await get(`/v1/users/${agent.agentAddress}/positions`)).body.positions;
    expect(position).toMatchObject({
      shares: shares.toString(),
      pendingDeposit: '0',
      claimableDeposit: '0',
    });
    const chain = await vaultOnchain(vault);
    const listed = (await get('/v1/vaults')).body.vaults.find(
      (item: { address: string }) => item.address === vault,
    );
    expect(listed.tvl).toBe(chain.totalAssets.toString());
  });

  it('follows a redemption requested over the RPC URL: pending, fulfilled, then claimed by its controller', async () => {
    // The delay this test sets stays after it: the tests that read the delay restore the
    // deployed sandbox first.
    const account = privateKeyToAccount(generatePrivateKey());
    await admin(sandbox.app, 'POST', '/sandbox/fund', {
      address: account.address,
      usdc: 50,
      eth: 1,
    });
    const wallet = createWalletClient({
      account,
      chain: baseSepolia,
      transport: http(sandbox.chain.rpcUrl),
    });
    const vault = sandbox.chain.deployment.vaults.configurable;
    const send = async (hash: Promise<Hash>) => {
      const receipt = await reader.waitForTransactionReceipt({
        hash: await hash,
        pollingInterval: 50,
      });
      expect(receipt.status).toBe('success');
    };
    const write = (functionName: string, args: unknown[]) =>
      send(
        wallet.writeContract({
          address: vault,
          abi: ConfigurableVault.abi,
          functionName,
          args,
          gas: 400_000n,
        } as never),
      );
    const setDelay = await admin(sandbox.app, 'POST', '/sandbox/vaults/fulfillment-delay', {
      vault_id: 'configurable',
      seconds: 60,
    });
    expect(setDelay.json()).toMatchObject({ vault_id: 'configurable', fulfillment_delay: 60 });
    await send(
      wallet.writeContract({
        address: sandbox.chain.deployment.usdc,
        abi: erc20Abi,
        functionName: 'approve',
        args: [vault, parseUnits('50', 6)],
      }),
    );
    await write('requestDeposit', [parseUnits('50', 6), account.address, account.address]);
    await advance(60);
    const history = `/v1/users/${account.address}/transactions`;
    await eventually(
      async () => (await get(history)).body.transactions,
      (txs) => txs[0]?.status === 'fulfilled',
    );
    // Not an agent of the sandbox: it claims for itself.
    const claimable = (await get(`/v1/users/${account.address}/positions`)).body.positions[0];
    expect(claimable).toMatchObject({ pendingDeposit: '0', claimableDeposit: '50000000' });
    await write('deposit', [parseUnits('50', 6), account.address, account.address]);
    const shares = (await reader.readContract({
      address: vault,
      abi: ConfigurableVault.abi,
      functionName: 'balanceOf',
      args: [account.address],
    })) as bigint;
    await write('requestRedeem', [shares, account.address, account.address]);
    await eventually(
      async () => (await get(history)).body.transactions,
      (txs) => txs[0]?.type === 'redeem_request',
      1000,
    );
    expect((await get(history)).body.transactions[0]).toMatchObject({
      type: 'redeem_request',
      status: 'pending',
      amount: '0',
      shares: shares.toString(),
    });
    await advance(60);
    const fulfilled = await eventually(
      async () => (await get(history)).body.transactions,
      (txs) => txs[0]?.status === 'fulfilled',
    );
    const assets = BigInt(fulfilled[0].amount);
    expect(assets).toBeGreaterThanOrEqual(49_999_999n);
    expect((await get(`/v1/users/${account.address}/positions`)).body.positions[0]).toMatchObject({
      shares: '0',
      pendingRedeem: '0',
      claimableRedeem: shares.toString(),
    });
    await write('redeem', [shares, account.address, account.address]);
    const done = await eventually(
      async () => (await get(history)).body.transactions,
      (txs) => txs[0]?.type === 'claim' && txs[1]?.status === 'claimed',
      1000,
    );
    expect(done.map((tx: { type: string; status: string }) => [tx.type, tx.status])).toEqual([
      ['claim', 'claimed'],
      ['redeem_request', 'claimed'],
      ['claim', 'claimed'],
      ['deposit_request', 'claimed'],
    ]);
    expect(done[0].amount).toBe(assets.toString());
    const usdc = await reader.readContract({
      address: sandbox.chain.deployment.usdc,
      abi: erc20Abi,
      functionName: 'balanceOf',
      args: [account.address],
    });
    expect(usdc).toBe(assets);
    // The vault's numbers still match the chain once the assets held apart have been paid out.
    const chain = await vaultOnchain(vault);
    const item = (await get(`/v1/vaults/${vault}`)).body;
    expect(item).toMatchObject({
      tvl: chain.totalAssets.toString(),
      totalShares: chain.totalSupply.toString(),
      pricePerShare: chain.pricePerShare.toString(),
    });
    // A request needs a controller: one for address zero could never be fulfilled or claimed.
    const zero = await wallet.writeContract({
      address: vault,
      abi: ConfigurableVault.abi,
      functionName: 'requestDeposit',
      args: [1n, '0x0000000000000000000000000000000000000000', account.address],
      gas: 400_000n,
    } as never);
    expect(
      (await reader.waitForTransactionReceipt({ hash: zero, pollingInterval: 50 })).status,
    ).toBe('reverted');
  });

  it('refuses a fulfilment delay for a synchronous vault', async () => {
    const response = await admin(sandbox.app, 'POST', '/sandbox/vaults/fulfillment-delay', {
      vault_id: 'moderate',
      seconds: 10,
    });
    expect(response.statusCode).toBe(400);
    expect(response.json().error).toMatch(/synchronous/);
  });

  it('records a reverted vault call as a failed transaction of its sender', async () => {
    const account = privateKeyToAccount(generatePrivateKey());
    await admin(sandbox.app, 'POST', '/sandbox/fund', {
      address: account.address,
      usdc: 5,
      eth: 1,
    });
    const wallet = createWalletClient({
      account,
      chain: baseSepolia,
      transport: http(sandbox.chain.rpcUrl),
    });
    // No approve first: the vault's transferFrom reverts. A fixed gas limit skips estimation.
    const hash = await wallet.writeContract({
      address: sandbox.chain.deployment.vaults.hedged,
      abi: SandboxVault.abi,
      functionName: 'deposit',
      args: [parseUnits('5', 6), account.address],
      gas: 300_000n,
    });
    const receipt = await reader.waitForTransactionReceipt({ hash, pollingInterval: 50 });
    expect(receipt.status).toBe('reverted');
    const txs = await eventually(
      async () => (await get(`/v1/users/${account.address}/transactions`)).body.transactions,
      (list) => list.length === 1,
      1000,
    );
    expect(txs).toEqual([
      expect.objectContaining({
        hash,
        type: 'deposit',
        status: 'failed',
        amount: '5000000',
        blockNumber: Number(receipt.blockNumber),
        logIndex: null,
      }),
    ]);
  });
});

describe('strategies', () => {
  const submit = async (apiKey: string, name: string) => {
    const response = await call(sandbox, apiKey, 'POST', '/api/v1/agent/strategy/submit', {
      name,
      description: 'a strategy for the data API tests',
    });
    expect(response.statusCode).toBe(200);
    return response.json().strategy_id as string;
  };
  const move = async (strategy_id: string, status: string) => {
    const response = await admin(sandbox.app, 'POST', '/sandbox/strategies/status', {
      strategy_id,
      status,
    });
    expect(response.statusCode).toBe(200);
  };

  it('maps the lifecycle, simulates returns from paper trading on, and allocates live ones to a vault', async () => {
    const agent = await chainAgent(sandbox, 'established');
    const id = await submit(agent.apiKey, 'Momentum Alpha');
    const find = async () =>
      (await get('/v1/strategies')).body.strategies.find((s: { id: string }) => s.id === id);
    expect(await find()).toMatchObject({
      status: 'shadow',
      vault: null,
      allocation: 0,
      apy: 0,
      agentName: expect.any(String),
    });
    await move(id, 'guardian_review');
    await move(id, 'paper_trading');
    expect((await find()).status).toBe('evolution');
    await advance(5 * DAY);
    const performance = await get(`/v1/strategies/${id}/performance`);
    expect(performance.status).toBe(200);
    expect(performance.body).toMatchObject({ id, name: 'Momentum Alpha', status: 'evolution' });
    expect(performance.body.returns).toHaveLength(5);
    // Deterministic: the same id and time give the same series.
    expect((await get(`/v1/strategies/${id}/performance`)).body).toEqual(performance.body);
    await move(id, 'pending_oracle_approval');
    await move(id, 'live');
    const live = await find();
    expect(live.status).toBe('live');
    expect(Object.values(sandbox.chain.deployment.vaults)).toContain(live.vault);
    expect(live.allocation).toBeGreaterThan(0);
    expect(live.riskScore).toBeGreaterThanOrEqual(1);
    expect(live.riskScore).toBeLessThanOrEqual(10);
    const detail = (await get(`/v1/vaults/${live.vault}`)).body;
    const allocations = detail.strategies.map((s: { allocation: number }) => s.allocation);
    expect(detail.strategies.map((s: { id: string }) => s.id)).toContain(id);
    expect(allocations.reduce((sum: number, a: number) => sum + a, 0)).toBeLessThanOrEqual(
      1 + 1e-9,
    );
    expect(
      (await get('/v1/strategies?status=live')).body.strategies.map((s: { id: string }) => s.id),
    ).toContain(id);
    expect(
      (await get('/v1/strategies?status=shadow')).body.strategies.map((s: { id: string }) => s.id),
    ).not.toContain(id);

    await move(id, 'deprecated');
    expect(await find()).toBeUndefined();
    expect((await get(`/v1/strategies/${id}/performance`)).body.status).toBe('deprecated');
  });

  it('answers STRATEGY_NOT_FOUND and INVALID_PARAMETER', async () => {
    const missing = await get(`/v1/strategies/0x${'00'.repeat(32)}/performance`);
    expect(missing.status).toBe(404);
    expect(missing.body.error.code).toBe('STRATEGY_NOT_FOUND');
    const bad = await get('/v1/strategies/xyz/performance');
    expect(bad.status).toBe(400);
    expect(bad.body.error).toMatchObject({
      code: 'INVALID_PARAMETER',
      details: { parameter: 'id' },
    });
    const sharpe = await get('/v1/strategies?minSharpe=abc');
    expect(sharpe.body.error).toMatchObject({
      code: 'INVALID_PARAMETER',
      details: { parameter: 'minSharpe' },
    });
  });
});

describe('nodes and protocol stats', () => {
  it('lists the sandbox’s node with its live block number, and registered nodes', async () => {
    const added = await admin(sandbox.app, 'POST', '/sandbox/nodes', {
      name: 'Research node',
      operator_address: `0x${'ab'.repeat(20)}`,
    });
    expect(added.statusCode).toBe(200);
    const { node_id, node_key } = added.json();
    expect(node_key).toMatch(/^agn_[0-9a-f]{64}$/);
    // Using the key marks the node as seen.
    const seen = await sandbox.app.inject({ url: '/v1/nodes', headers: { 'x-api-key': node_key } });
    expect(seen.statusCode).toBe(200);
    const nodes = seen.json().nodes;
    const head = Number(await reader.getBlockNumber({ cacheTime: 0 }));
    expect(nodes[0]).toMatchObject({ id: 'sandbox', status: 'online', blockNumber: head });
    expect(nodes[0].version).toMatch(/anvil/i);
    expect(nodes.find((node: { id: string }) => node.id === node_id)).toMatchObject({
      name: 'Research node',
      status: 'online',
      blockNumber: null,
    });
    const wrongKey = await sandbox.app.inject({
      url: '/v1/nodes',
      headers: { 'x-api-key': 'agn_nope' },
    });
    expect(wrongKey.statusCode).toBe(401);
    expect(wrongKey.json().error.code).toBe('INVALID_API_KEY');
  });

  it('sums the vaults and counts what the index holds', async () => {
    // What the index holds is this test's deposit alone.
    await deployed.restore();
    const agent = await chainAgent(sandbox);
    await deposit(agent.apiKey, 'hedged', 10);
    const { status, body } = await get('/v1/protocol/stats');
    expect(status).toBe(200);
    const vaults = (await get('/v1/vaults')).body;
    expect(body).toMatchObject({
      totalTvl: vaults.totalTvl,
      vaults: 6,
      agents: await sandbox.store.agents.count(),
      blockNumber: Number(await reader.getBlockNumber({ cacheTime: 0 })),
    });
    expect(body).toMatchObject({
      totalTvl: '10000000',
      strategies: 0,
      liveStrategies: 0,
      agents: 1,
      users: 1,
      transactions: 1,
      volume24h: '10000000',
    });

    // The admin API says how long writes waited to be indexed before they were answered.
    const info = (await admin(sandbox.app, 'GET', '/sandbox/info')).json();
    expect(info.index).toMatchObject({
      block_number: body.blockNumber,
      writes_indexed: expect.any(Number),
    });
    expect(info.index.writes_indexed).toBeGreaterThan(0);
    expect(info.index.write_wait_ms_p50).toBeGreaterThanOrEqual(0);
    expect(info.index.write_wait_ms_p99).toBeGreaterThanOrEqual(info.index.write_wait_ms_p50);
  });
});
