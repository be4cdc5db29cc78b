import { type Address, erc20Abi, parseUnits } from 'viem';
import { describe, expect, it } from 'vitest';
import { VAULT_IDS } from '../../../src/api/schemas/index.ts';
import { MockUSDC, SandboxVault } from '../../../src/sandbox/chain/contracts/artifacts.ts';
import { type ChainReader, call, chainAgent, useChainSandbox } from '../../helpers/chain.ts';
import { admin, type TestSandbox } from '../../helpers/sandbox.ts';
import { adminInProcess, useSnapshot } from '../../helpers/snapshot.ts';

let sandbox: TestSandbox;
let reader: ChainReader;
useChainSandbox((started, chain) => {
  sandbox = started;
  reader = chain;
});
/** The sandbox as deployed: no agents, empty vaults (a share is worth 1 USDC), no clock moved. */
const deployed = useSnapshot(
  adminInProcess(() => sandbox),
  'deployed',
);

const shareBalance = (vault: Address, owner: Address) =>
  reader.readContract({
    address: vault,
    abi: SandboxVault.abi,
    functionName: 'balanceOf',
    args: [owner],
  });
const usdcBalance = (owner: Address) =>
  reader.readContract({
    address: sandbox.chain.deployment.usdc,
    abi: erc20Abi,
    functionName: 'balanceOf',
    args: [owner],
  });

describe('agent wallets', () => {
  it('funds each new agent with 10,000 USDC and gas for well over 100 transactions', async () => {
    const agent = await chainAgent(sandbox);
    expect(await usdcBalance(agent.agentAddress)).toBe(parseUnits('10000', 6));
    const gasPrice = await reader.getGasPrice();
    const eth = await reader.getBalance({ address: agent.agentAddress });
    // A vault deposit costs under 150k gas.
    expect(eth).toBeGreaterThan(100n * 150_000n * gasPrice);
    expect(agent.agentAddress).not.toBe(agent.account.address);
  });
});

describe('GET /api/v1/vaults', () => {
  it('lists the six vaults with onchain totals', async () => {
    const response = await sandbox.app.inject({ url: '/api/v1/vaults' });
    expect(response.statusCode).toBe(200);
    const body = response.json();
    expect(body.total).toBe(6);
    expect(body.vaults.map((vault: { vault_id: string }) => vault.vault_id)).toEqual([
      ...VAULT_IDS,
    ]);
    for (const vault of body.vaults) {
      expect(vault).toMatchObject({
        address: sandbox.chain.deployment.vaults[vault.vault_id as (typeof VAULT_IDS)[number]],
        asset: sandbox.chain.deployment.usdc,
        status: 'active',
      });
      expect(vault.total_assets).toMatch(/^\d+(\.\d+)?$/);
      expect(vault.apy).toBeGreaterThan(0);
    }
  });
});

describe('POST /api/v1/agent/vault/deposit', () => {
  it('approves, deposits and reports shares equal to the vault balanceOf', async () => {
    // Shares at 1 USDC each: no other test's deposit has earned yield in this vault.
    await deployed.restore();
    const agent = await chainAgent(sandbox);
    const vault = sandbox.chain.deployment.vaults.moderate;
    const response = await call(sandbox, agent.apiKey, 'POST', '/api/v1/agent/vault/deposit', {
      vault_id: 'moderate',
      amount_usdc: 250.5,
    });
    expect(response.statusCode).toBe(200);
    const body = response.json();
    expect(body).toMatchObject({
      success: true,
      agent_address: agent.agentAddress,
      vault: 'Moderate USDC Vault',
      vault_address: vault,
      amount_usdc: 250.5,
      status: 'confirmed',
    });
    expect(body.shares_balance).toBe((await shareBalance(vault, agent.agentAddress)).toString());
    for (const hash of [body.approve_tx, body.deposit_tx]) {
      expect((await reader.getTransactionReceipt({ hash })).status).toBe('success');
    }
    expect(await usdcBalance(agent.agentAddress)).toBe(parseUnits('9749.5', 6));

    const positions = await call(sandbox, agent.apiKey, 'GET', '/api/v1/agent/vault/positions');
    expect(positions.json()).toEqual({
      positions: [
        {
          vault_id: 'moderate',
          vault_address: vault,
          vault_name: 'Moderate USDC Vault',
          shares: '250.5',
          value_usdc: expect.stringMatching(/^250\.\d{1,6}$/),
        },
      ],
    });
    // Worth what was put in, or more with the yield since: never less (250.0 would be a loss).
    const value = parseUnits(positions.json().positions[0].value_usdc, 6);
    expect(value).toBeGreaterThanOrEqual(parseUnits('250.5', 6));
  });

  it('runs concurrent deposits by one agent one after another, with no nonce gaps', async () => {
    const agent = await chainAgent(sandbox);
    const nonceBefore = await reader.getTransactionCount({ address: agent.agentAddress });
    const deposits = await Promise.all(
      Array.from({ length: 6 }, () =>
        call(sandbox, agent.apiKey, 'POST', '/api/v1/agent/vault/deposit', {
          vault_id: 'conservative',
          amount_usdc: 10,
        }),
      ),
    );
    for (const response of deposits) expect(response.statusCode).toBe(200);
    // Approve plus deposit per request, and nothing else.
    expect(await reader.getTransactionCount({ address: agent.agentAddress })).toBe(
      nonceBefore + 12,
    );
    const vault = sandbox.chain.deployment.vaults.conservative;
    const shares = await shareBalance(vault, agent.agentAddress);
    expect(shares).toBeGreaterThanOrEqual(59_000_000n);
    const reported = deposits.map((response) => BigInt(response.json().shares_balance));
    expect(reported.sort((a, b) => (a < b ? -1 : 1)).at(-1)).toBe(shares);
  });

  it('refuses an amount above the balance, naming it, and sends nothing', async () => {
    const agent = await chainAgent(sandbox);
    const nonceBefore = await reader.getTransactionCount({ address: agent.agentAddress });
    const response = await call(sandbox, agent.apiKey, 'POST', '/api/v1/agent/vault/deposit', {
      vault_id: 'aggressive',
      amount_usdc: 10_000.000001,
    });
    expect(response.statusCode).toBe(400);
    expect(response.json()).toEqual({
      error: "amount_usdc 10000.000001 is more than the wallet's USDC balance of 10000",
    });
    expect(await reader.getTransactionCount({ address: agent.agentAddress })).toBe(nonceBefore);
  });

  it.each([
    [{ vault_id: 'savings', amount_usdc: 1 }, 'vault_id: must be one of conservative'],
    [{ vault_id: 'moderate', amount_usdc: 0 }, 'amount_usdc: must be greater than 0'],
    [{ vault_id: 'moderate', amount_usdc: -5 }, 'amount_usdc: must be greater than 0'],
    [{ vault_id: 'moderate', amount_usdc: '5' }, 'amount_usdc: must be a number'],
    [{ vault_id: 'moderate', amount_usdc: 1.1234567 }, 'at most 6 decimal places'],
    [{ vault_id: 'moderate' }, 'amount_usdc: is required'],
    [{ vault_id: 'moderate', amount_usdc: 1e21 }, 'amount_usdc: must be at most 1000000000'],
  ])('refuses %j with 400', async (payload, message) => {
    const agent = await chainAgent(sandbox);
    const response = await call(
      sandbox,
      agent.apiKey,
      'POST',
      '/api/v1/agent/vault/deposit',
      payload,
    );
    expect(response.statusCode).toBe(400);
    expect(response.json().error).toContain(message);
  });

  it('answers 502 when the approve reverts onchain, and records no deposit', async () => {
    const agent = await chainAgent(sandbox);
    // Fault injection through the real contract: a frozen account's approve reverts.
    await sandbox.chain.treasury.exclusive((session) =>
      session.send([
        {
          label: 'freeze',
          address: sandbox.chain.deployment.usdc,
          abi: MockUSDC.abi,
          functionName: 'setFrozen',
          args: [agent.agentAddress, true],
        },
      ]),
    );
    const statsBefore = (await sandbox.app.inject({ url: '/api/v1/agents/stats' })).json();
    const nonce = () => reader.getTransactionCount({ address: agent.agentAddress });
    const nonceBefore = await nonce();
    const response = await call(sandbox, agent.apiKey, 'POST', '/api/v1/agent/vault/deposit', {
      vault_id: 'hedged',
      amount_usdc: 5,
    });
    expect(response.statusCode).toBe(502);
    expect(response.json().error).toMatch(/^approve failed onchain: AccountFrozen\(/);
    // Refused before anything was sent: neither the approve nor the deposit was mined.
    expect(await nonce()).toBe(nonceBefore);
    expect(await shareBalance(sandbox.chain.deployment.vaults.hedged, agent.agentAddress)).toBe(0n);
    const statsAfter = (await sandbox.app.inject({ url: '/api/v1/agents/stats' })).json();
    expect(statsAfter.total_deposits_usdc).toBe(statsBefore.total_deposits_usdc);
    const lookup = await sandbox.app.inject({
      url: `/api/v1/agent/auth/lookup?wallet=${agent.account.address}`,
    });
    expect(lookup.json().performance_score).toBe(0);

    // The wallet recovers: after unfreezing, the next deposit goes through with a fresh nonce.
    await sandbox.chain.treasury.exclusive((session) =>
      session.send([
        {
          label: 'unfreeze',
          address: sandbox.chain.deployment.usdc,
          abi: MockUSDC.abi,
          functionName: 'setFrozen',
          args: [agent.agentAddress, false],
        },
      ]),
    );
    const retry = await call(sandbox, agent.apiKey, 'POST', '/api/v1/agent/vault/deposit', {
      vault_id: 'hedged',
      amount_usdc: 5,
    });
    expect(retry.statusCode).toBe(200);
  });
});

describe('yield', () => {
  deployed.restoreBeforeEach();

  it('grows value_usdc and total_assets as sandbox time passes', async () => {
    const agent = await chainAgent(sandbox);
    const deposited = await call(sandbox, agent.apiKey, 'POST', '/api/v1/agent/vault/deposit', {
      vault_id: 'aggressive',
      amount_usdc: 1000,
    });
    expect(deposited.statusCode).toBe(200);
    const positionValue = async () => {
      const positions = await call(sandbox, agent.apiKey, 'GET', '/api/v1/agent/vault/positions');
      return Number(positions.json().positions[0].value_usdc);
    };
    const before = await positionValue();
    expect(before).toBe(1000);
    const asked = sandbox.clock.nowSeconds() + 365 * 24 * 3600;
    const advance = await admin(sandbox.app, 'POST', '/sandbox/clock/advance', {
      seconds: 365 * 24 * 3600,
    });
    expect(advance.statusCode).toBe(200);
    const block = await reader.getBlock();
    expect(Number(block.timestamp)).toBeGreaterThanOrEqual(asked);
    // The agent's money alone is in the vault: it earns 15 % a year, simple interest, from the
    // deposit's block to the advance's.
    const depositBlock = await reader.getTransactionReceipt({ hash: deposited.json().deposit_tx });
    const depositedAt = (await reader.getBlock({ blockNumber: depositBlock.blockNumber }))
      .timestamp;
    const elapsed = Number(block.timestamp - depositedAt);
    expect(elapsed).toBeGreaterThanOrEqual(365 * 24 * 3600);
    const after = await positionValue();
    expect(after).toBeCloseTo(1000 * (1 + (0.15 * elapsed) / (365 * 24 * 3600)), 5);
  });
});

describe('stats and ranking', () => {
  deployed.restoreBeforeEach();

  it('counts deposits onchain and ranks agents by performance score', async () => {
    const statsOf = async () => (await sandbox.app.inject({ url: '/api/v1/agents/stats' })).json();
    expect(await statsOf()).toMatchObject({ total_agents: 0, total_deposits_usdc: 0 });
    const second = await chainAgent(sandbox, undefined, { agent_name: 'Second Agent' });
    const agent = await chainAgent(sandbox, undefined, { agent_name: 'Top Agent' });
    for (const [apiKey, amount_usdc] of [
      [second.apiKey, 1000],
      [agent.apiKey, 5000],
    ] as const) {
      const deposited = await call(sandbox, apiKey, 'POST', '/api/v1/agent/vault/deposit', {
        vault_id: 'inverse',
        amount_usdc,
      });
      expect(deposited.statusCode).toBe(200);
    }
    // The stats are this test's deposits, and equal the vaults' onchain totals.
    const stats = await statsOf();
    expect(stats).toMatchObject({ total_agents: 2, total_deposits_usdc: 6000 });
    let onchain = 0n;
    for (const id of VAULT_IDS) {
      onchain += await reader.readContract({
        address: sandbox.chain.deployment.vaults[id],
        abi: SandboxVault.abi,
        functionName: 'totalDeposited',
      });
    }
    expect(stats.total_deposits_usdc).toBe(Number(onchain) / 1e6);

    const lookup = await sandbox.app.inject({
      url: `/api/v1/agent/auth/lookup?wallet=${agent.account.address}`,
    });
    // 1 point per 100 USDC deposited.
    expect(lookup.json().performance_score).toBe(50);
    const top = (await sandbox.app.inject({ url: '/api/v1/agents?limit=1' })).json();
    expect(top.agents).toEqual([expect.objectContaining({ agent_name: 'Top Agent' })]);
    const ranking = (await sandbox.app.inject({ url: '/api/v1/agents' })).json();
    expect(
      ranking.agents.map((entry: { agent_name: string; performance_score: number }) => [
        entry.agent_name,
        entry.performance_score,
      ]),
    ).toEqual([
      ['Top Agent', 50],
      ['Second Agent', 10],
    ]);
  });
});

describe('POST /api/v1/positions', () => {
  deployed.restoreBeforeEach();

  it("reads any wallet's positions onchain, and refuses a bad address", async () => {
    const agent = await chainAgent(sandbox);
    const deposited = await call(sandbox, agent.apiKey, 'POST', '/api/v1/agent/vault/deposit', {
      vault_id: 'conservative',
      amount_usdc: 42,
    });
    expect(deposited.statusCode).toBe(200);
    const response = await sandbox.app.inject({
      method: 'POST',
      url: '/api/v1/positions',
      payload: { wallet_address: agent.agentAddress },
    });
    expect(response.statusCode).toBe(200);
    expect(response.json()).toMatchObject({
      wallet_address: agent.agentAddress,
      positions: [{ vault_id: 'conservative' }],
    });
    // The vault was empty: a share is worth 1 USDC, so 42 USDC bought 42 shares, worth 42 USDC
    // at the deposit's block (the last one: no time has passed on the chain since).
    expect(response.json()).toEqual({
      wallet_address: agent.agentAddress,
      positions: [
        expect.objectContaining({ vault_id: 'conservative', shares: '42', value_usdc: '42' }),
      ],
      total_value_usdc: '42',
    });
    for (const payload of [{}, { wallet_address: '0x1234' }, { wallet_address: 42 }]) {
      const bad = await sandbox.app.inject({ method: 'POST', url: '/api/v1/positions', payload });
      expect(bad.statusCode).toBe(400);
      expect(bad.json().error).toContain('wallet_address');
    }
  });
});
