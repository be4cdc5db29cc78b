import { formatEther } from 'viem';
import { describe, expect, it, vi } from 'vitest';
import { AGENT_FUNDING } from '../../../src/sandbox/chain/agent-wallets.ts';
import { AgentOnboarding, AgentPass } from '../../../src/sandbox/chain/contracts/artifacts.ts';
import { type ChainReader, call, chainAgent, useChainSandbox } from '../../helpers/chain.ts';
import {
  admin,
  getNonce,
  newAccount,
  postRegister,
  signedBody,
  type TestSandbox,
} from '../../helpers/sandbox.ts';

let sandbox: TestSandbox;
let reader: ChainReader;
useChainSandbox((started, chain) => {
  sandbox = started;
  reader = chain;
});

const faucet = (apiKey: string) => call(sandbox, apiKey, 'POST', '/api/v1/agent/faucet');

describe('GET /api/v1/agent/wallet', () => {
  it('reports every field from the chain', async () => {
    const agent = await chainAgent(sandbox);
    const response = await call(sandbox, agent.apiKey, 'GET', '/api/v1/agent/wallet');
    expect(response.statusCode).toBe(200);
    const body = response.json();
    const eth = await reader.getBalance({ address: agent.agentAddress });
    expect(body).toEqual({
      configured: true,
      agent_address: agent.agentAddress,
      network: 'Base Sepolia',
      chain_id: 84532,
      eth_balance: formatEther(eth),
      eth_balance_wei: eth.toString(),
      has_gas: true,
      usdc_balance: 10000,
      usdc_balance_raw: '10000000000',
      protocol_token_balance: '100',
      positions: [],
    });
  });
});

describe('POST /api/v1/agent/faucet', () => {
  it('drips ETH once, then answers the cooldown until 24 hours have passed', async () => {
    const agent = await chainAgent(sandbox);
    const before = await reader.getBalance({ address: agent.agentAddress });
    const drip = await faucet(agent.apiKey);
    expect(drip.statusCode).toBe(200);
    const body = drip.json();
    expect(body).toMatchObject({
      success: true,
      agent_address: agent.agentAddress,
      status: 'confirmed',
      drip_amount_wei: '100000000000000000',
      drip_amount_eth: '0.1',
    });
    const receipt = await reader.getTransactionReceipt({ hash: body.tx_hash });
    expect(receipt.status).toBe('success');
    expect(receipt.to?.toLowerCase()).toBe(agent.agentAddress.toLowerCase());
    expect(await reader.getBalance({ address: agent.agentAddress })).toBe(before + 10n ** 17n);

    const cooling = await faucet(agent.apiKey);
    expect(cooling.statusCode).toBe(429);
    const cooldown = cooling.json();
    expect(cooldown).toEqual({
      success: false,
      agent_address: agent.agentAddress,
      error: expect.stringContaining('cooling down'),
      next_eligible_timestamp: expect.any(Number),
      seconds_remaining: expect.any(Number),
    });
    expect(cooldown.seconds_remaining).toBeGreaterThan(24 * 3600 - 10);
    expect(cooldown.seconds_remaining).toBeLessThanOrEqual(24 * 3600);
    expect(Number(cooling.headers['retry-after'])).toBe(cooldown.seconds_remaining);

    await admin(sandbox.app, 'POST', '/sandbox/clock/advance', { seconds: 24 * 3600 });
    expect((await faucet(agent.apiKey)).statusCode).toBe(200);
  });

  it('drips once for five concurrent requests', async () => {
    const agent = await chainAgent(sandbox);
    const before = await reader.getBalance({ address: agent.agentAddress });
    const responses = await Promise.all(Array.from({ length: 5 }, () => faucet(agent.apiKey)));
    expect(responses.map((r) => r.statusCode).sort()).toEqual([200, 429, 429, 429, 429]);
    expect(await reader.getBalance({ address: agent.agentAddress })).toBe(before + 10n ** 17n);
  });
});

describe('GET /api/v1/agent/galaxy/eligibility', () => {
  it('lists each criterion, met or unmet, and is eligible once all are met', async () => {
    const agent = await chainAgent(sandbox, 'established');
    const check = async () =>
      (await call(sandbox, agent.apiKey, 'GET', '/api/v1/agent/galaxy/eligibility')).json();
    const fresh = await check();
    expect(fresh).toEqual({
      eligible: false,
      agent_address: agent.agentAddress,
      campaign: 'galaxy',
      criteria: [
        { id: 'registered', description: expect.any(String), met: true },
        { id: 'deposited', description: expect.any(String), met: false },
        { id: 'strategy_submitted', description: expect.any(String), met: false },
        { id: 'voted', description: expect.any(String), met: false },
      ],
    });
    await call(sandbox, agent.apiKey, 'POST', '/api/v1/agent/vault/deposit', {
      vault_id: 'moderate',
      amount_usdc: 1,
    });
    await call(sandbox, agent.apiKey, 'POST', '/api/v1/agent/strategy/submit', {
      name: 'Eligible',
      description: 'A strategy for the campaign.',
    });
    const { proposal_id } = (
      await admin(sandbox.app, 'POST', '/sandbox/proposals', { title: 'Eligibility' })
    ).json();
    await call(sandbox, agent.apiKey, 'POST', '/api/v1/agent/governance/vote', {
      proposal_id,
      support: 1,
    });
    const done = await check();
    expect(done.eligible).toBe(true);
    expect(done.criteria.every((c: { met: boolean }) => c.met)).toBe(true);
  });
});

describe('POST /api/v1/nfts', () => {
  it('lists the agent pass minted to the registered wallet at registration', async () => {
    const agent = await chainAgent(sandbox);
    const response = await sandbox.app.inject({
      method: 'POST',
      url: '/api/v1/nfts',
      payload: { wallet_address: agent.account.address },
    });
    expect(response.statusCode).toBe(200);
    const body = response.json();
    expect(body).toMatchObject({ wallet_address: agent.account.address, total: 1 });
    const [pass] = body.nfts;
    expect(pass).toMatchObject({
      contract_address: sandbox.chain.deployment.agent_pass,
      collection_name: 'Agent Pass',
      symbol: 'AGPASS',
    });
    const owner = await reader.readContract({
      address: sandbox.chain.deployment.agent_pass,
      abi: AgentPass.abi,
      functionName: 'ownerOf',
      args: [BigInt(pass.token_id)],
    });
    expect(owner).toBe(agent.account.address);

    const nobody = await sandbox.app.inject({
      method: 'POST',
      url: '/api/v1/nfts',
      payload: { wallet_address: newAccount().address },
    });
    expect(nobody.json()).toMatchObject({ nfts: [], total: 0 });
  });

  it('answers 400 to a missing or invalid address', async () => {
    for (const payload of [{}, { wallet_address: 'vitalik.eth' }]) {
      const response = await sandbox.app.inject({ method: 'POST', url: '/api/v1/nfts', payload });
      expect(response.statusCode).toBe(400);
      expect(response.json().error).toContain('wallet_address');
    }
  });
});

describe('POST /sandbox/fund', () => {
  it('mints USDC and sends ETH to any address', async () => {
    const address = newAccount().address;
    const response = await admin(sandbox.app, 'POST', '/sandbox/fund', {
      address,
      usdc: 1234.5,
      eth: 2,
    });
    expect(response.statusCode).toBe(200);
    expect(response.json()).toMatchObject({
      address,
      usdc_balance_raw: '1234500000',
      eth_balance_wei: '2000000000000000000',
    });
    expect(await reader.getBalance({ address })).toBe(2n * 10n ** 18n);
    const none = await admin(sandbox.app, 'POST', '/sandbox/fund', { address });
    expect(none.statusCode).toBe(400);
    expect(none.json().error).toContain('give usdc, eth or both');
    // 1e-7 is how JavaScript writes 0.0000001: it is converted exactly, not refused.
    const tiny = await admin(sandbox.app, 'POST', '/sandbox/fund', { address, eth: 1e-7 });
    expect(tiny.statusCode).toBe(200);
    expect(tiny.json().eth_balance_wei).toBe('2000000100000000000');
    const tooPrecise = await admin(sandbox.app, 'POST', '/sandbox/fund', { address, eth: 1e-19 });
    expect(tooPrecise.statusCode).toBe(400);
    expect(tooPrecise.json().error).toBe('eth: must have at most 18 decimal places');
  });
});

describe('registration and the chain', () => {
  it('funds one wallet and mints one pass for duplicated concurrent registrations', async () => {
    const account = newAccount();
    const { nonce, message } = await getNonce(sandbox.app, account.address);
    const body = await signedBody({ wallet: account.address, nonce, message, signer: account });
    const responses = await Promise.all([1, 2, 3].map(() => postRegister(sandbox.app, body)));
    expect(responses.map((r) => r.statusCode).sort()).toEqual([200, 409, 409]);
    const nfts = await sandbox.app.inject({
      method: 'POST',
      url: '/api/v1/nfts',
      payload: { wallet_address: account.address },
    });
    expect(nfts.json().total).toBe(1);
    // One wallet funded, once: exactly the onboarding amounts, onchain.
    const apiKey = (
      responses.find((r) => r.statusCode === 200) as { json(): { api_key: string } }
    ).json().api_key;
    const wallet = (await call(sandbox, apiKey, 'GET', '/api/v1/agent/wallet')).json();
    expect(await reader.getBalance({ address: wallet.agent_address })).toBe(AGENT_FUNDING.eth);
    expect(wallet.usdc_balance_raw).toBe(AGENT_FUNDING.usdcRaw.toString());
    expect(wallet.protocol_token_balance).toBe('100');
    const onboarded = await reader.readContract({
      address: sandbox.chain.deployment.agent_onboarding,
      abi: AgentOnboarding.abi,
      functionName: 'onboarded',
      args: [wallet.agent_address],
    });
    expect(onboarded).toBe(true);
  });

  /**
   * Registers `account`, moving the clock 600 s (past the nonce's life) at one point of the
   * registration: before the commit that consumes the nonce (its first check has passed), or
   * just after it (the wallet is not funded yet).
   */
  async function registerWithClockMoved(
    account: ReturnType<typeof newAccount>,
    when: 'before commit' | 'after commit',
  ) {
    const { nonce, message } = await getNonce(sandbox.app, account.address);
    const body = await signedBody({ wallet: account.address, nonce, message, signer: account });
    const commitSoon = sandbox.store.commitSoon.bind(sandbox.store);
    const moveClock = async () => {
      const moved = await admin(sandbox.app, 'POST', '/sandbox/clock/advance', { seconds: 600 });
      expect(moved.statusCode).toBe(200);
    };
    let moved = false;
    const spy = vi.spyOn(sandbox.store, 'commitSoon').mockImplementation(async (work) => {
      // Only the registration's commit: its nonce, checked on arrival, is not consumed yet.
      if (moved || (await sandbox.store.nonces.find(nonce))?.consumed_at !== null) {
        return commitSoon(work);
      }
      moved = true;
      if (when === 'before commit') await moveClock();
      const result = await commitSoon(work);
      if (when === 'after commit') await moveClock();
      return result;
    });
    try {
      const registered = await postRegister(sandbox.app, body);
      expect(moved).toBe(true);
      return registered;
    } finally {
      spy.mockRestore();
    }
  }
  const passes = async (wallet: string) =>
    (
      await sandbox.app.inject({
        method: 'POST',
        url: '/api/v1/nfts',
        payload: { wallet_address: wallet },
      })
    ).json().total;
  const retry = async (account: ReturnType<typeof newAccount>) => {
    const fresh = await getNonce(sandbox.app, account.address);
    return postRegister(
      sandbox.app,
      await signedBody({ wallet: account.address, ...fresh, signer: account }),
    );
  };

  it('never onboards a wallet for a nonce that expires while its registration runs', async () => {
    const account = newAccount();
    const registered = await registerWithClockMoved(account, 'before commit');
    expect(registered.statusCode).toBe(401);
    expect(registered.json().error).toMatch(/nonce has expired/);
    expect(await passes(account.address)).toBe(0);
    // A retry with a fresh nonce registers it, with one pass.
    expect((await retry(account)).statusCode).toBe(200);
    expect(await passes(account.address)).toBe(1);
  });

  it('keeps a registration whose nonce was taken before it expired, and never mints a second pass', async () => {
    const account = newAccount();
    const registered = await registerWithClockMoved(account, 'after commit');
    expect(registered.statusCode).toBe(200);
    expect(await passes(account.address)).toBe(1);
    expect((await retry(account)).statusCode).toBe(409);
    expect(await passes(account.address)).toBe(1);
  });
});
