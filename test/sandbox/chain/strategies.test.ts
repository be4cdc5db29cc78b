import { keccak256, toHex } from 'viem';
import { describe, expect, it } from 'vitest';
import { STRATEGY_STATUSES } from '../../../src/api/schemas/index.ts';
import { StrategyRegistryV3 } from '../../../src/sandbox/chain/contracts/artifacts.ts';
import { type ChainReader, call, chainAgent, useChainSandbox } from '../../helpers/chain.ts';
import { admin, type TestSandbox } from '../../helpers/sandbox.ts';

let sandbox: TestSandbox;
let reader: ChainReader;
useChainSandbox((started, chain) => {
  sandbox = started;
  reader = chain;
});

const STRATEGY = { name: 'Mean reversion', description: 'Buys dips, sells rips, sizes small.' };
const DEFAULT_RISK = {
  max_position_size_percent: 10,
  max_leverage: 200,
  stop_loss_percent: 500,
  slippage_tolerance_bps: 100,
  correlation_threshold: 70,
  velocity_limit: 1_000_000,
  flash_loans_enabled: false,
};

const submit = (apiKey: string, payload: object) =>
  call(sandbox, apiKey, 'POST', '/api/v1/agent/strategy/submit', payload);

const setStatus = (strategy_id: string, status: string) =>
  admin(sandbox.app, 'POST', '/sandbox/strategies/status', { strategy_id, status });

describe('POST /api/v1/agent/strategy/submit', () => {
  it('stores the strategy onchain with the default risk parameters and reports the receipt', async () => {
    const agent = await chainAgent(sandbox);
    const response = await submit(agent.apiKey, STRATEGY);
    expect(response.statusCode).toBe(200);
    const body = response.json();
    expect(body).toMatchObject({
      success: true,
      agent_address: agent.agentAddress,
      strategy_name: STRATEGY.name,
      risk_params: DEFAULT_RISK,
      status: 'shadow',
    });
    expect(body.strategy_id).toMatch(/^0x[0-9a-f]{64}$/);
    expect(body.dna_string).toMatch(/^0x[0-9a-f]{64}$/);
    const receipt = await reader.getTransactionReceipt({ hash: body.tx_hash });
    expect(receipt.status).toBe('success');
    expect(body.block_number).toBe(Number(receipt.blockNumber));
    expect(body.gas_used).toBe(Number(receipt.gasUsed));

    const stored = await reader.readContract({
      address: sandbox.chain.deployment.strategy_registry,
      abi: StrategyRegistryV3.abi,
      functionName: 'getStrategy',
      args: [body.strategy_id],
    });
    expect(stored).toMatchObject({
      dna: body.dna_string,
      owner: agent.agentAddress,
      name: STRATEGY.name,
      description: STRATEGY.description,
      status: 0,
    });
    expect(stored.risk).toEqual({
      maxPositionSizePercent: 10n,
      maxLeverage: 200n,
      stopLossPercent: 500n,
      slippageToleranceBps: 100n,
      correlationThreshold: 70n,
      velocityLimit: 1_000_000n,
      flashLoansEnabled: false,
    });
  });

  it('normalises dna_string to 0x plus lowercase hex, with or without the prefix', async () => {
    const agent = await chainAgent(sandbox);
    const hex = 'AB'.repeat(32);
    for (const dna of [hex, `0x${hex}`]) {
      const response = await submit(agent.apiKey, { ...STRATEGY, dna_string: dna });
      expect(response.statusCode).toBe(200);
      expect(response.json().dna_string).toBe(`0x${'ab'.repeat(32)}`);
    }
  });

  it('derives the DNA from name, agent, wallet, timestamp and sequence when none is given', async () => {
    const agent = await chainAgent(sandbox);
    const body = (await submit(agent.apiKey, STRATEGY)).json();
    const block = await reader.getBlock({ blockNumber: BigInt(body.block_number) });
    // The agent's first strategy: sequence 0.
    const candidates = [0, 1, 2].map((lag) =>
      keccak256(
        toHex(
          [
            STRATEGY.name,
            agent.body.agent_id,
            agent.agentAddress.toLowerCase(),
            Number(block.timestamp) - lag,
            0,
          ].join('\n'),
        ),
      ),
    );
    expect(candidates).toContain(body.dna_string);
  });

  it('takes every risk parameter at its bounds', async () => {
    const agent = await chainAgent(sandbox);
    const risk = {
      max_position_size_percent: 100,
      max_leverage: 1000,
      stop_loss_percent: 50,
      slippage_tolerance_bps: 1,
      correlation_threshold: 0,
      velocity_limit: 1000,
      flash_loans_enabled: true,
    };
    const response = await submit(agent.apiKey, { ...STRATEGY, ...risk });
    expect(response.statusCode).toBe(200);
    expect(response.json().risk_params).toEqual(risk);
  });

  it.each([
    [{ max_position_size_percent: 0 }, 'max_position_size_percent: must be 1 to 100'],
    [{ max_position_size_percent: 101 }, 'max_position_size_percent: must be 1 to 100'],
    [{ max_leverage: 99 }, 'max_leverage: must be 100 to 1000'],
    [{ max_leverage: 150.5 }, 'max_leverage: must be an integer'],
    [{ stop_loss_percent: 5001 }, 'stop_loss_percent: must be 50 to 5000'],
    [{ slippage_tolerance_bps: 0 }, 'slippage_tolerance_bps: must be 1 to 1000'],
    [{ correlation_threshold: -1 }, 'correlation_threshold: must be 0 to 100'],
    [{ velocity_limit: 999 }, 'velocity_limit: must be 1000 to'],
    [{ flash_loans_enabled: 'yes' }, 'flash_loans_enabled: must be true or false'],
    [{ dna_string: '0x1234' }, 'dna_string: must be 32 bytes'],
    [{ name: 'ab' }, 'name: must be 3 to 100 characters'],
    [{ description: 'too short' }, 'description: must be 10 to 2000 characters'],
  ])('refuses %j with 400 and sends nothing', async (change, message) => {
    const agent = await chainAgent(sandbox);
    const nonce = await reader.getTransactionCount({ address: agent.agentAddress });
    const response = await submit(agent.apiKey, { ...STRATEGY, ...change });
    expect(response.statusCode).toBe(400);
    expect(response.json().error).toContain(message);
    expect(await reader.getTransactionCount({ address: agent.agentAddress })).toBe(nonce);
  });
});

describe('GET /api/v1/agent/strategy/list', () => {
  it("enumerates the caller's strategies from the registry, and only theirs", async () => {
    const agent = await chainAgent(sandbox);
    const other = await chainAgent(sandbox);
    const notMine = await submit(other.apiKey, { ...STRATEGY, name: 'Not mine' });
    expect(notMine.statusCode).toBe(200);
    const ids: string[] = [];
    for (const name of ['Alpha', 'Beta']) {
      ids.push((await submit(agent.apiKey, { ...STRATEGY, name })).json().strategy_id);
    }
    const response = await call(sandbox, agent.apiKey, 'GET', '/api/v1/agent/strategy/list');
    expect(response.statusCode).toBe(200);
    const body = response.json();
    expect(body.agent_address).toBe(agent.agentAddress);
    expect(body.total_count).toBe(2);
    expect(body.strategies.map((s: { strategy_id: string }) => s.strategy_id)).toEqual(ids);
    const onchain = await reader.readContract({
      address: sandbox.chain.deployment.strategy_registry,
      abi: StrategyRegistryV3.abi,
      functionName: 'strategiesOf',
      args: [agent.agentAddress],
    });
    expect(onchain).toEqual(ids);
    const theirs = await call(sandbox, other.apiKey, 'GET', '/api/v1/agent/strategy/list');
    expect(theirs.json().strategies.map((s: { strategy_id: string }) => s.strategy_id)).toEqual([
      notMine.json().strategy_id,
    ]);
    const [first] = body.strategies;
    expect(first).toMatchObject({
      name: 'Alpha',
      description: STRATEGY.description,
      status: 'shadow',
      strategy_contract: sandbox.chain.deployment.strategy_registry,
    });
    expect(Math.abs(first.created_at - sandbox.clock.nowSeconds())).toBeLessThan(5);
    expect(first.last_status_change).toBe(first.created_at);

    const lookup = await sandbox.app.inject({
      url: `/api/v1/agent/auth/lookup?wallet=${agent.account.address}`,
    });
    expect(lookup.json()).toMatchObject({ strategies_submitted: 2, performance_score: 20 });
  });
});

describe('strategy lifecycle (POST /sandbox/strategies/status)', () => {
  async function newStrategy() {
    const agent = await chainAgent(sandbox);
    return (await submit(agent.apiKey, STRATEGY)).json().strategy_id as string;
  }
  const statusOf = async (id: `0x${string}`) =>
    STRATEGY_STATUSES[
      (
        await reader.readContract({
          address: sandbox.chain.deployment.strategy_registry,
          abi: StrategyRegistryV3.abi,
          functionName: 'getStrategy',
          args: [id],
        })
      ).status
    ];

  it('moves forward along the pipeline one step at a time, up to live', async () => {
    const id = await newStrategy();
    const pipeline = ['guardian_review', 'paper_trading', 'pending_oracle_approval', 'live'];
    let previous = 'shadow';
    for (const status of pipeline) {
      const response = await setStatus(id, status);
      expect(response.statusCode).toBe(200);
      expect(response.json()).toMatchObject({ strategy_id: id, previous_status: previous, status });
      expect(await statusOf(id as `0x${string}`)).toBe(status);
      previous = status;
    }
  });

  it('pauses any active state and resumes to the state it was paused from', async () => {
    const id = await newStrategy();
    expect((await setStatus(id, 'guardian_review')).statusCode).toBe(200);
    expect((await setStatus(id, 'paused')).statusCode).toBe(200);
    const wrongResume = await setStatus(id, 'shadow');
    expect(wrongResume.statusCode).toBe(400);
    expect(wrongResume.json().error).toContain('resumes to the state it was paused from');
    expect((await setStatus(id, 'guardian_review')).statusCode).toBe(200);
  });

  it('refuses skips, moves backwards and anything after deprecated, with 400', async () => {
    const id = await newStrategy();
    const skip = await setStatus(id, 'live');
    expect(skip.statusCode).toBe(400);
    expect(skip.json().error).toBe(
      'a strategy cannot move from shadow to live; from shadow it may move to guardian_review, paused, deprecated',
    );
    expect((await setStatus(id, 'shadow')).statusCode).toBe(400);
    expect((await setStatus(id, 'deprecated')).statusCode).toBe(200);
    for (const status of STRATEGY_STATUSES) {
      const response = await setStatus(id, status);
      expect(response.statusCode).toBe(400);
      expect(response.json().error).toContain('deprecated is terminal');
    }
    expect(await statusOf(id as `0x${string}`)).toBe('deprecated');
  });

  it('updates last_status_change in the list', async () => {
    const agent = await chainAgent(sandbox);
    const id = (await submit(agent.apiKey, STRATEGY)).json().strategy_id;
    await admin(sandbox.app, 'POST', '/sandbox/clock/advance', { seconds: 3600 });
    await setStatus(id, 'guardian_review');
    const [listed] = (
      await call(sandbox, agent.apiKey, 'GET', '/api/v1/agent/strategy/list')
    ).json().strategies;
    expect(listed.status).toBe('guardian_review');
    expect(listed.last_status_change - listed.created_at).toBeGreaterThanOrEqual(3600);
  });

  it('answers 404 for an unknown strategy and 400 for a bad status', async () => {
    expect((await setStatus(`0x${'00'.repeat(32)}`, 'paused')).statusCode).toBe(404);
    const bad = await setStatus(`0x${'00'.repeat(32)}`, 'retired');
    expect(bad.statusCode).toBe(400);
    expect(bad.json().error).toContain('status: must be one of shadow');
  });
});
