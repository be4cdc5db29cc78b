import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { VAULT_IDS } from '../../src/api/schemas/values.ts';
import { run as configList } from '../../src/cli/commands/config/list.ts';
import { run as configSet } from '../../src/cli/commands/config/set.ts';
import { run as deposit } from '../../src/cli/commands/deposit.ts';
import { run as eligibility } from '../../src/cli/commands/eligibility.ts';
import { run as faucet } from '../../src/cli/commands/faucet.ts';
import { run as health } from '../../src/cli/commands/health.ts';
import { run as keysList } from '../../src/cli/commands/keys/list.ts';
import { run as leaderboard } from '../../src/cli/commands/leaderboard.ts';
import { run as lookup } from '../../src/cli/commands/lookup.ts';
import { run as nfts } from '../../src/cli/commands/nfts.ts';
import { run as positions } from '../../src/cli/commands/positions.ts';
import { run as proposals } from '../../src/cli/commands/proposals.ts';
import { run as sandboxFulfillmentDelay } from '../../src/cli/commands/sandbox/fulfillment-delay.ts';
import { run as sandboxFund } from '../../src/cli/commands/sandbox/fund.ts';
import { run as sandboxInfo } from '../../src/cli/commands/sandbox/info.ts';
import { run as sandboxNode } from '../../src/cli/commands/sandbox/node.ts';
import { run as sandboxProposal } from '../../src/cli/commands/sandbox/proposal.ts';
import { run as sandboxStrategyStatus } from '../../src/cli/commands/sandbox/strategy-status.ts';
import { run as stats } from '../../src/cli/commands/stats.ts';
import { run as strategyList } from '../../src/cli/commands/strategy/list.ts';
import { run as strategySubmit } from '../../src/cli/commands/strategy/submit.ts';
import { run as vote } from '../../src/cli/commands/vote.ts';
import { run as wallet } from '../../src/cli/commands/wallet.ts';
import { run as whoami } from '../../src/cli/commands/whoami.ts';
import type { Context, GlobalOptions } from '../../src/cli/context.ts';
import { jsonBodies, runCaptured, sandboxTime, useCannedServer } from '../helpers/run-context.ts';

/**
 * Every command outside the data group that prints a human table or lines, run() against a
 * real HTTP server on port 0 answering canned bodies with live-sized values: a million USDC,
 * names as long as the schemas allow, 66-character ids and hashes, 42-character addresses.
 * Each stdout line fits 80 columns; where a value is shortened, --wide shows it whole.
 */

const AGENT = '0x0763726B9227D70D227b16E79D47542c2194279C';
const VAULT = '0x375b27a37D2dbAf7A38C706aB8Dc500E3102b396';
const OTHER_VAULT = `0x${'Ab'.repeat(20)}`;
const HASH = `0x${'9e'.repeat(32)}`;
const STRATEGY_ID = `0x${'3f'.repeat(32)}`;
const NOW = Date.parse('2026-11-28T12:00:00Z') / 1000;
/** Names of the longest length the schemas allow (an agent's or a strategy's: 100). */
const LONG_NAME = `Momentum Alpha ${'x'.repeat(60)} ${'y'.repeat(24)}`;
const LONG_TEXT = Array.from({ length: 60 }, (_, i) => `word${i}`).join(' ');
const TOKEN_ID = '1'.repeat(78);

const position = (vaultId: string | undefined, name: string, address: string) => ({
  ...(vaultId !== undefined && { vault_id: vaultId }),
  vault_address: address,
  vault_name: name,
  shares: '1000000.123456',
  value_usdc: '1000000.654321',
});
const POSITIONS = [
  position('moderate', 'Moderate USDC Vault', VAULT),
  position(undefined, 'Delta Neutral Basis Trade Vault With A Long Name', OTHER_VAULT),
];

const BODIES: Record<string, unknown> = {
  'GET /api/v1/agent/vault/positions': { positions: POSITIONS },
  'POST /api/v1/positions': {
    wallet_address: AGENT,
    positions: POSITIONS,
    total_value_usdc: '2000001.308642',
  },
  'GET /api/v1/agent/strategy/list': {
    agent_address: AGENT,
    strategies: [
      {
        strategy_id: STRATEGY_ID,
        name: LONG_NAME,
        description: LONG_TEXT,
        status: 'pending_oracle_approval',
        created_at: NOW - 3 * 86_400,
        last_status_change: NOW - 3600,
        strategy_contract: VAULT,
      },
    ],
    total_count: 1,
  },
  'GET /api/v1/agents': {
    agents: [
      {
        agent_name: LONG_NAME,
        tier: 'established',
        performance_score: 98.7654321,
        strategies_submitted: 123456,
      },
    ],
    count: 1,
  },
  'GET /api/v1/agents/stats': {
    total_agents: 123456,
    active_agents: 12345,
    strategies_submitted: 1234567,
    total_deposits_usdc: 1234567890.123456,
  },
  'POST /api/v1/nfts': {
    wallet_address: AGENT,
    nfts: [
      {
        contract_address: VAULT,
        collection_name: 'Agent Pass: the collection with a long descriptive name',
        symbol: 'AGENTPASS',
        token_id: TOKEN_ID,
      },
    ],
    total: 1,
  },
  'GET /api/v1/agent/wallet': {
    configured: true,
    agent_address: AGENT,
    network: 'sandbox',
    chain_id: 31337,
    eth_balance: '1000.123456789012345678',
    eth_balance_wei: '1000123456789012345678',
    has_gas: true,
    usdc_balance: 1000000.5,
    usdc_balance_raw: '1000000500000',
    protocol_token_balance: '1000000.5',
    positions: POSITIONS,
  },
  'GET /api/v1/agent/galaxy/eligibility': {
    eligible: false,
    agent_address: AGENT,
    campaign: 'galaxy-season-1',
    criteria: [
      { id: 'registered_with_a_long_criterion_id', description: LONG_TEXT, met: true },
      { id: 'deposited', description: 'a deposit of at least 100 USDC', met: false },
    ],
  },
  'GET /api/v1/agent/auth/lookup': {
    registered: true,
    agent_name: LONG_NAME,
    tier: 'established',
    status: 'active',
    strategies_submitted: 123456,
    performance_score: 98.7654321,
    api_key_prefix: 'agk_live_1234',
    created_at: '2026-11-01T08:00:00Z',
  },
  'POST /api/v1/agent/vault/deposit': {
    success: true,
    agent_address: AGENT,
    vault: 'configurable',
    vault_address: VAULT,
    amount_usdc: 1000000.123456,
    approve_tx: HASH,
    deposit_tx: HASH,
    status: 'pending',
    shares_balance: '1000000123456',
    request_id: '123456789012345678901234567890',
    fulfillable_at: NOW + 86_400,
  },
  'POST /api/v1/agent/strategy/submit': {
    success: true,
    agent_address: AGENT,
    strategy_name: LONG_NAME,
    strategy_id: STRATEGY_ID,
    dna_string: HASH,
    risk_params: {
      max_position_size_percent: 10,
      max_leverage: 200,
      stop_loss_percent: 500,
      slippage_tolerance_bps: 100,
      correlation_threshold: 70,
      velocity_limit: 1000000,
      flash_loans_enabled: false,
    },
    tx_hash: HASH,
    status: 'shadow',
    block_number: 18_234_567,
    gas_used: 1_234_567,
  },
  'POST /api/v1/agent/faucet': {
    success: true,
    agent_address: AGENT,
    tx_hash: HASH,
    status: 'confirmed',
    drip_amount_wei: '100000000000000000',
    drip_amount_eth: '0.1',
  },
  'POST /api/v1/agent/governance/vote': {
    success: true,
    agent_address: AGENT,
    proposal_id: 123456789,
    support: 1,
    support_label: 'for',
    reason: LONG_TEXT,
    tx_hash: HASH,
    status: 'confirmed',
    block_number: 18_234_567,
  },
  'GET /health': {
    status: 'ok',
    version: '0.1.0',
    chain_id: 31337,
    chain_name: 'agentctl sandbox (anvil)',
    rpc_connected: true,
  },
  'GET /api/v1/proposals': {
    proposals: [
      {
        proposal_id: 123456789,
        title: `Raise the conservative APY ${'and more '.repeat(19)}`.slice(0, 200),
        description: LONG_TEXT,
        proposer: AGENT,
        status: 'active',
        vote_start: NOW - 86_400,
        vote_end: NOW + 6 * 86_400,
        votes: { for: 123456789, against: 12345678, abstain: 1234567 },
      },
    ],
    total: 1,
  },
  'GET /sandbox/info': {
    version: '0.1.0',
    role: 'writer',
    database: 'sqlite',
    chain_id: 31337,
    rpc_url: 'http://127.0.0.1:8787/rpc',
    contracts: {
      usdc: VAULT,
      protocol_token: VAULT,
      strategy_registry: VAULT,
      governor: VAULT,
      agent_pass: VAULT,
      agent_onboarding: VAULT,
      vaults: Object.fromEntries(VAULT_IDS.map((id) => [id, VAULT])),
      deployed_block: 1,
    },
    clock: { now: NOW, offset_seconds: 864_000 },
    state_dir: '/home/agent/.local/state/agentctl',
    persistent: true,
    rate_limit: true,
    index: {
      block_number: 18_234_567,
      writes_indexed: 123456,
      write_wait_ms_p50: 12.5,
      write_wait_ms_p99: 123.25,
    },
    standby: { status: 'following', block_number: 18_234_567 },
    graphql: {
      sockets: 1,
      subscriptions: 2,
      distinct_subscriptions: 2,
      events_sent: 3,
      dropped: 0,
    },
  },
  'POST /sandbox/fund': {
    address: AGENT,
    usdc_tx: HASH,
    eth_tx: HASH,
    usdc_balance_raw: '1000000000000000',
    eth_balance_wei: '1000123456789012345678',
  },
  'POST /sandbox/proposals': { proposal_id: 123456789, tx_hash: HASH, vote_end: NOW + 86_400 },
  'POST /sandbox/strategies/status': {
    strategy_id: STRATEGY_ID,
    previous_status: 'pending_oracle_approval',
    status: 'live',
    tx_hash: HASH,
  },
  'POST /sandbox/vaults/fulfillment-delay': {
    vault_id: 'configurable',
    vault_address: VAULT,
    fulfillment_delay: 31_536_000,
    tx_hash: HASH,
  },
  'POST /sandbox/nodes': {
    node_id: '5b3c2d1e-0000-4000-8000-000000000000',
    node_key: `agk_node_${'f'.repeat(64)}`,
  },
};

const server = useCannedServer(jsonBodies(BODIES), sandboxTime(NOW));
const dir = mkdtempSync(join(tmpdir(), 'agentctl-widths-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Runs one command's run() with a context on the canned server; its stdout. */
async function output<O>(
  command: (options: O, context: Context) => Promise<void>,
  options: O,
  globals: GlobalOptions = {},
  configDir = dir,
): Promise<string> {
  const globalsHere = { baseUrl: server.url, apiKey: 'agk_test', ...globals };
  return (await runCaptured(command, options, globalsHere, { AGENTCTL_CONFIG_DIR: configDir }))
    .stdout;
}

const tooWide = (text: string) => text.split('\n').filter((line) => [...line].length > 80);

/** The text with the line breaks, padding and table borders a narrow rendering adds taken out. */
const joined = (text: string) => text.replace(/[│┌┐└┘├┤┬┴┼─]/g, ' ').replace(/\s+/g, ' ');

describe('human output of live-sized values fits 80 columns', () => {
  it('positions: vaults by id, amounts without raw units, addresses short; --wide whole', async () => {
    for (const options of [{}, { wallet: AGENT }]) {
      const text = await output(positions, options);
      expect(tooWide(text)).toEqual([]);
      expect(text).toMatch(
        /│ moderate +│ 1000000\.123456 +│ 1000000\.654321 USDC +│ 0x375b…b396 │/,
      );
      expect(text).toMatch(/│ Delta Neutral… +│/);
      const wide = await output(positions, { ...options, wide: true });
      expect(wide).toContain(VAULT);
      expect(wide).toContain(OTHER_VAULT);
      expect(wide).toContain('Delta Neutral Basis Trade Vault With A Long Name');
      expect(wide).toContain('1000000.654321 USDC (1000000654321 raw)');
    }
  });

  it('strategy list: the id shortened, the name clipped; --wide whole', async () => {
    const text = await output(strategyList, {});
    expect(tooWide(text)).toEqual([]);
    expect(text).toContain('0x3f3f…3f3f');
    expect(text).toContain('pending_oracle_approval');
    expect(text).toContain('2026-11-28T11:00:00Z');
    const wide = await output(strategyList, { wide: true });
    expect(wide).toContain(STRATEGY_ID);
    expect(wide).toContain(LONG_NAME);
    expect(wide).toContain('2026-11-25T12:00:00Z (3 d ago)');
  });

  it('leaderboard: a long agent name clipped; --wide whole', async () => {
    const text = await output(leaderboard, {});
    expect(tooWide(text)).toEqual([]);
    expect(text).toMatch(/│ 1 +│ Momentum Alpha x+… │ established │ 98\.7654 +│ 123456 +│/);
    const wide = await output(leaderboard, { wide: true });
    expect(wide).toContain(LONG_NAME);
    expect(wide).toContain('98.7654321');
  });

  it('wallet: its positions without raw units; --wide with them and the addresses', async () => {
    const text = await output(wallet, {});
    expect(tooWide(text)).toEqual([]);
    expect(text).toContain(`address         ${AGENT}`);
    expect(text).toMatch(/│ moderate +│ 1000000\.123456 shares │ 1000000\.654321 USDC │/);
    const wide = await output(wallet, { wide: true });
    expect(wide).toContain('1000000.654321 USDC (1000000654321 raw)');
    expect(wide).toContain(OTHER_VAULT);
  });

  it('nfts: the contract short and the token id clipped; --wide whole', async () => {
    const text = await output(nfts, { wallet: AGENT });
    expect(tooWide(text)).toEqual([]);
    expect(text).toContain('0x375b…b396');
    const wide = await output(nfts, { wallet: AGENT, wide: true });
    expect(wide).toContain(VAULT);
    expect(wide).toContain(TOKEN_ID);
    expect(wide).toContain('Agent Pass: the collection with a long descriptive name');
  });

  it('keys list: the full address, the path under --wide', async () => {
    const configDir = mkdtempSync(join(tmpdir(), 'agentctl-widths-keys-'));
    try {
      mkdirSync(join(configDir, 'keystores'), { recursive: true });
      const name = `operator-key-${'n'.repeat(51)}`;
      writeFileSync(
        join(configDir, 'keystores', `${name}.json`),
        JSON.stringify({ address: AGENT.slice(2).toLowerCase() }),
      );
      const text = await output(keysList, {}, {}, configDir);
      expect(tooWide(text)).toEqual([]);
      expect(text).toContain(AGENT);
      const wide = await output(keysList, { wide: true }, {}, configDir);
      expect(wide).toContain(name);
      expect(wide).toContain(join(configDir, 'keystores', `${name}.json`));
    } finally {
      rmSync(configDir, { recursive: true, force: true });
    }
  });

  it('field lines wrap long values, whole (lookup, whoami, stats, health, eligibility, proposals)', async () => {
    const lookupText = await output(lookup, { wallet: AGENT });
    expect(tooWide(lookupText)).toEqual([]);
    expect(joined(lookupText)).toContain(LONG_NAME);
    for (const [command, options] of [
      [stats, {}],
      [health, {}],
      [eligibility, {}],
      [proposals, {}],
    ] as const) {
      const text = await output(command as (o: object, c: Context) => Promise<void>, options);
      expect(tooWide(text)).toEqual([]);
    }
    expect(joined(await output(eligibility, {}))).toContain(LONG_TEXT);
    const proposalText = await output(proposals, {});
    expect(joined(proposalText)).toContain(LONG_TEXT);
    expect(proposalText).toContain(`proposer     ${AGENT}`);
    const configDir = mkdtempSync(join(tmpdir(), 'agentctl-widths-whoami-'));
    try {
      await output(configSet, { key: 'wallet_address', value: AGENT }, {}, configDir);
      const text = await output(whoami, {}, {}, configDir);
      expect(tooWide(text)).toEqual([]);
      expect(joined(text)).toContain(LONG_NAME);
      expect(text).toContain(AGENT);
      const settings = await output(configList, {}, {}, configDir);
      expect(tooWide(settings)).toEqual([]);
      expect(settings).toContain(AGENT);
    } finally {
      rmSync(configDir, { recursive: true, force: true });
    }
  });

  it('deposit, strategy submit, faucet and vote: hashes and ids whole, each line within 80', async () => {
    const deposited = await output(deposit, {
      vault: 'configurable',
      amount: '1000000',
      yes: true,
    });
    expect(tooWide(deposited)).toEqual([]);
    expect(deposited).toContain(HASH);
    expect(deposited).toContain(VAULT);
    const submitted = await output(strategySubmit, {
      name: LONG_NAME,
      description: LONG_TEXT,
    });
    expect(tooWide(submitted)).toEqual([]);
    expect(submitted).toContain(STRATEGY_ID);
    expect(submitted).toContain(HASH);
    expect(joined(submitted)).toContain(LONG_NAME);
    const dryRun = await output(strategySubmit, {
      name: LONG_NAME,
      description: LONG_TEXT,
      dna: HASH,
      dryRun: true,
    });
    expect(tooWide(dryRun)).toEqual([]);
    expect(dryRun).toContain(HASH);
    const dripped = await output(faucet, {});
    expect(tooWide(dripped)).toEqual([]);
    expect(dripped).toContain(AGENT);
    expect(dripped).toContain(HASH);
    const voted = await output(vote, { proposalId: '123456789', support: 'for', reason: 'yes' });
    expect(tooWide(voted)).toEqual([]);
    expect(voted).toContain(HASH);
    expect(joined(voted)).toContain(LONG_TEXT);
  });

  it('sandbox: info, fund, proposal, strategy-status, fulfillment-delay and node', async () => {
    const adminToken = 'admin-token';
    const texts = [
      await output(sandboxInfo, { adminToken }),
      await output(sandboxFund, { adminToken, address: AGENT, usdc: '1000000000', eth: '1000' }),
      await output(sandboxProposal, {
        adminToken,
        title: 'Raise the conservative APY',
        description: undefined,
      }),
      await output(sandboxStrategyStatus, { adminToken, strategyId: STRATEGY_ID, status: 'live' }),
      await output(sandboxFulfillmentDelay, { adminToken, seconds: '31536000' }),
      await output(sandboxNode, { adminToken, name: LONG_NAME, operator: AGENT }),
    ];
    for (const text of texts) expect(tooWide(text)).toEqual([]);
    expect(texts.join('')).toContain(HASH);
    expect(texts.join('')).toContain(STRATEGY_ID);
    expect(texts.join('')).toContain(`agk_node_${'f'.repeat(64)}`);
  });
});
