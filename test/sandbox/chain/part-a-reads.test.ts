import { type Address, createWalletClient, formatEther, http, parseEther, toHex } from 'viem';
import { describe, expect, it } from 'vitest';
import { agentPassesOf, balancesOf } from '../../../src/sandbox/chain/agent-wallets.ts';
import { activeProposals } from '../../../src/sandbox/chain/governance.ts';
import { createRpcClient } from '../../../src/sandbox/chain/rpc.ts';
import { strategiesOf, totalStrategies } from '../../../src/sandbox/chain/strategies.ts';
import {
  formatUsdc,
  listVaults,
  positionsOf,
  totalDeposited,
} from '../../../src/sandbox/chain/vaults.ts';
import { createKeyring, readMnemonic } from '../../../src/sandbox/chain/wallets.ts';
import { call, chainAgent, useChainSandbox } from '../../helpers/chain.ts';
import { admin, newAccount, type TestSandbox } from '../../helpers/sandbox.ts';

/**
 * Part A's reads come from the index (so that a replica, which runs no chain, answers them):
 * each write is read back at once by its author (the writer indexes before it answers), and
 * every moved route answers what the chain's own views answer (the reads they made before),
 * before and after the index is started afresh and rebuilt from the chain.
 */
let sandbox: TestSandbox;
useChainSandbox((started) => {
  sandbox = started;
});

const get = (url: string, apiKey?: string) =>
  sandbox.app.inject({ url, ...(apiKey && { headers: { 'x-api-key': apiKey } }) });
const post = (url: string, payload: object) => sandbox.app.inject({ method: 'POST', url, payload });

/** Every moved route's answer for `agent`. */
async function answers(agent: { apiKey: string; agentAddress: Address; wallet: Address }) {
  const bodies = await Promise.all([
    get('/api/v1/vaults'),
    get('/api/v1/proposals'),
    get('/api/v1/agents/stats'),
    get('/api/v1/agent/vault/positions', agent.apiKey),
    get('/api/v1/agent/strategy/list', agent.apiKey),
    get('/api/v1/agent/galaxy/eligibility', agent.apiKey),
    post('/api/v1/positions', { wallet_address: agent.agentAddress }),
    post('/api/v1/nfts', { wallet_address: agent.wallet }),
    get(`/api/v1/agent/auth/lookup?wallet=${agent.wallet}`),
    get('/api/v1/agent/wallet', agent.apiKey),
  ]);
  for (const body of bodies) expect(body.statusCode, body.body).toBe(200);
  const [
    vaults,
    proposals,
    stats,
    positions,
    strategies,
    eligibility,
    wallet,
    nfts,
    lookup,
    status,
  ] = bodies.map((body) => body.json());
  return {
    vaults,
    proposals,
    stats,
    positions,
    strategies,
    eligibility,
    wallet,
    nfts,
    lookup,
    status,
  };
}

/** GET /api/v1/agent/wallet's balances, read back at once, against the chain's. */
async function expectBalancesOnChain(agent: { apiKey: string; agentAddress: Address }) {
  const answered = await get('/api/v1/agent/wallet', agent.apiKey);
  expect(answered.statusCode, answered.body).toBe(200);
  const onChain = await balancesOf(sandbox.chain, agent.agentAddress);
  const body = answered.json();
  expect({
    eth: BigInt(body.eth_balance_wei),
    usdc: BigInt(body.usdc_balance_raw),
    tokens: body.protocol_token_balance,
    hasGas: body.has_gas,
  }).toEqual({
    eth: onChain.eth,
    usdc: onChain.usdc,
    tokens: formatEther(onChain.tokens),
    hasGas: onChain.hasGas,
  });
  return onChain;
}

/** The same answers as the chain's views give them (what the routes read before). */
async function chainAnswers(agent: { agentAddress: Address; wallet: Address }) {
  const { chain } = sandbox;
  const vaults = await listVaults(chain);
  const proposals = await activeProposals(chain);
  const held = await positionsOf(chain, agent.agentAddress);
  const strategies = await strategiesOf(chain, agent.agentAddress);
  const nfts = await agentPassesOf(chain, agent.wallet);
  return {
    vaults: { vaults, total: vaults.length },
    proposals: { proposals, total: proposals.length },
    strategiesSubmitted: Number(await totalStrategies(chain)),
    totalDeposits: Number(formatUsdc(await totalDeposited(chain))),
    positions: { positions: held.positions },
    strategies: {
      agent_address: agent.agentAddress,
      strategies,
      total_count: strategies.length,
    },
    wallet: {
      wallet_address: agent.agentAddress,
      positions: held.positions,
      total_value_usdc: formatUsdc(held.totalValueRaw),
    },
    nfts: { wallet_address: agent.wallet, nfts, total: nfts.length },
  };
}

function expectChain(
  answered: Awaited<ReturnType<typeof answers>>,
  chain: Awaited<ReturnType<typeof chainAnswers>>,
) {
  expect(answered.vaults).toEqual(chain.vaults);
  expect(answered.proposals).toEqual(chain.proposals);
  expect(answered.stats.strategies_submitted).toBe(chain.strategiesSubmitted);
  expect(answered.stats.total_deposits_usdc).toBe(chain.totalDeposits);
  expect(answered.positions).toEqual(chain.positions);
  expect(answered.strategies).toEqual(chain.strategies);
  expect(answered.wallet).toEqual(chain.wallet);
  expect(answered.nfts).toEqual(chain.nfts);
}

describe('Part A reads from the index', () => {
  it('reads each write back at once, as the chain answers it, before and after a rebuild', async () => {
    // Answers kept before the writes (GET /api/v1/vaults's) must not be served after them.
    expect((await get('/api/v1/vaults')).statusCode).toBe(200);
    const agent = await chainAgent(sandbox, 'established');
    const who = { ...agent, wallet: agent.account.address };
    // The registration's pass, at once.
    const passes = (await post('/api/v1/nfts', { wallet_address: who.wallet })).json();
    expect(passes.total).toBe(1);

    const proposal = await admin(sandbox.app, 'POST', '/sandbox/proposals', {
      title: 'Read back at once',
    });
    const { proposal_id } = proposal.json();
    const before = (await get('/api/v1/agents/stats')).json();
    const vote = await call(sandbox, agent.apiKey, 'POST', '/api/v1/agent/governance/vote', {
      proposal_id,
      support: 2,
    });
    expect(vote.statusCode).toBe(200);
    const listed = (await get('/api/v1/proposals')).json();
    expect(
      listed.proposals.find((p: { proposal_id: number }) => p.proposal_id === proposal_id).votes,
    ).toEqual({ for: 0, against: 0, abstain: 1 });

    const deposit = await call(sandbox, agent.apiKey, 'POST', '/api/v1/agent/vault/deposit', {
      vault_id: 'aggressive',
      amount_usdc: 125,
    });
    expect(deposit.statusCode).toBe(200);
    const submitted = await call(sandbox, agent.apiKey, 'POST', '/api/v1/agent/strategy/submit', {
      name: 'Read back',
      description: 'A strategy read back at once from the index',
    });
    expect(submitted.statusCode).toBe(200);

    const after = await answers(who);
    expect(after.stats.total_deposits_usdc).toBe(before.total_deposits_usdc + 125);
    expect(after.stats.strategies_submitted).toBe(before.strategies_submitted + 1);
    expect(after.positions.positions.map((p: { vault_id: string }) => p.vault_id)).toEqual([
      'aggressive',
    ]);
    expect(after.strategies.strategies).toEqual([
      expect.objectContaining({
        strategy_id: submitted.json().strategy_id,
        name: 'Read back',
        description: 'A strategy read back at once from the index',
        status: 'shadow',
      }),
    ]);
    expect(after.eligibility.criteria.every((c: { met: boolean }) => c.met)).toBe(true);
    expect(after.lookup.strategies_submitted).toBe(1);
    expectChain(after, await chainAnswers(who));

    // The index started afresh and rebuilt from the chain answers the same.
    const indexer = sandbox.runtime.parts.indexer();
    const head = indexer.checkpoint();
    await indexer.replaceWith(undefined);
    await indexer.syncTo(head?.number);
    expect(indexer.checkpoint()).toEqual(head);
    expect(await answers(who)).toEqual(after);
  });
});

describe("the wallet's balances from the index", () => {
  it('reads them back at once as the chain holds them: funding, a drip, a deposit, a transfer over the RPC URL, a rebuild', async () => {
    // The registration's funding, on the first read (which waits for it).
    const agent = await chainAgent(sandbox);
    const funded = await expectBalancesOnChain(agent);
    expect(funded.eth).toBeGreaterThan(0n);
    expect(funded.usdc).toBeGreaterThan(0n);
    expect(funded.tokens).toBeGreaterThan(0n);

    const drip = await call(sandbox, agent.apiKey, 'POST', '/api/v1/agent/faucet');
    expect(drip.statusCode, drip.body).toBe(200);
    const dripped = await expectBalancesOnChain(agent);
    expect(dripped.eth).toBe(funded.eth + BigInt(drip.json().drip_amount_wei));

    const deposit = await call(sandbox, agent.apiKey, 'POST', '/api/v1/agent/vault/deposit', {
      vault_id: 'moderate',
      amount_usdc: 40,
    });
    expect(deposit.statusCode, deposit.body).toBe(200);
    const deposited = await expectBalancesOnChain(agent);
    expect(deposited.usdc).toBe(dripped.usdc - 40_000_000n);
    // The approve's and the deposit's gas.
    expect(deposited.eth).toBeLessThan(dripped.eth);

    // Someone else sends the agent's wallet ETH over the RPC URL: no event tells of it; the
    // block is logged and indexed by the next checkpoint.
    const someone = newAccount();
    const fund = await admin(sandbox.app, 'POST', '/sandbox/fund', {
      address: someone.address,
      eth: 0.01,
    });
    expect(fund.statusCode, fund.body).toBe(200);
    const wallet = createWalletClient({ account: someone, transport: http(sandbox.chain.rpcUrl) });
    await wallet.sendTransaction({
      to: agent.agentAddress,
      value: parseEther('0.002'),
      chain: null,
    });
    const checkpoint = await admin(sandbox.app, 'POST', '/sandbox/checkpoint');
    expect(checkpoint.statusCode, checkpoint.body).toBe(200);
    const received = await expectBalancesOnChain(agent);
    expect(received.eth).toBe(deposited.eth + parseEther('0.002'));

    // The agent's own key sends ETH over the RPC URL (its gas and value, no event): logged and
    // indexed by the next checkpoint.
    const row = await sandbox.store.agents.findByAgentAddress(agent.agentAddress);
    const own = createKeyring(readMnemonic(sandbox.dir) ?? '')(row?.wallet_index ?? -1);
    expect(own.address).toBe(agent.agentAddress);
    const agentWallet = createWalletClient({ account: own, transport: http(sandbox.chain.rpcUrl) });
    await agentWallet.sendTransaction({
      to: someone.address,
      value: parseEther('0.001'),
      chain: null,
    });
    expect((await admin(sandbox.app, 'POST', '/sandbox/checkpoint')).statusCode).toBe(200);
    const sent = await expectBalancesOnChain(agent);
    // The value and the gas.
    expect(sent.eth).toBeLessThan(received.eth - parseEther('0.001'));

    // Its ETH set outside any transaction: the next checkpoint reads it back (a block after
    // the change, for the checkpoint to hold something new).
    await createRpcClient(sandbox.chain.rpcUrl).call('anvil_setBalance', [
      agent.agentAddress,
      toHex(parseEther('7')),
    ]);
    const other = await admin(sandbox.app, 'POST', '/sandbox/fund', {
      address: newAccount().address,
      eth: 0.01,
    });
    expect(other.statusCode, other.body).toBe(200);
    expect((await admin(sandbox.app, 'POST', '/sandbox/checkpoint')).statusCode).toBe(200);
    expect((await expectBalancesOnChain(agent)).eth).toBe(parseEther('7'));

    // The index started afresh and rebuilt from the chain answers the same.
    const indexer = sandbox.runtime.parts.indexer();
    const head = indexer.checkpoint();
    await indexer.replaceWith(undefined);
    await indexer.syncTo(head?.number);
    expect(indexer.checkpoint()).toEqual(head);
    await expectBalancesOnChain(agent);
  });
});

describe("a wallet's readiness from the database", () => {
  it('waits while the onboarding outbox holds the agent, whichever process funds it (as a replica would)', async () => {
    const agent = await chainAgent(sandbox);
    const agentId: string = agent.body.agent_id;
    // The agent queued as another process's registration leaves it: this onboarder, which
    // funds what it queued itself, knows nothing of it.
    await sandbox.store.transaction((tx) =>
      tx.onboarding.enqueue({
        agent_id: agentId,
        agent_address: agent.agentAddress,
        registered_wallet: agent.account.address,
        queued_at: sandbox.clock.nowSeconds() * 1000,
      }),
    );
    const { onboarding } = sandbox.store;
    const isWaiting = onboarding.isWaiting;
    let looks = 0;
    let lookedOften = () => {};
    const looked = new Promise<void>((resolve) => {
      lookedOften = resolve;
    });
    // Counts the waits' looks at the outbox: each of the two requests looks twice at least.
    onboarding.isWaiting = async (id) => {
      const waiting = await isWaiting(id);
      if (++looks === 4) lookedOften();
      return waiting;
    };
    try {
      let answered = 0;
      const requests = [
        get('/api/v1/agent/wallet', agent.apiKey),
        post('/api/v1/nfts', { wallet_address: agent.account.address }),
      ].map((request) => request.finally(() => answered++));
      await looked;
      expect(answered).toBe(0);
      // Funded: the row goes (in the commit that logs the funding block, on a writer).
      await sandbox.store.transaction((tx) => tx.onboarding.remove([agentId]));
      for (const response of await Promise.all(requests)) {
        expect(response.statusCode, response.body).toBe(200);
      }
    } finally {
      onboarding.isWaiting = isWaiting;
    }
  });
});
