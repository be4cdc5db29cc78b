import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { run as history } from '../../src/cli/commands/data/history.ts';
import { run as nodes } from '../../src/cli/commands/data/nodes.ts';
import { run as positions } from '../../src/cli/commands/data/positions.ts';
import { run as strategies } from '../../src/cli/commands/data/strategies.ts';
import { run as strategy } from '../../src/cli/commands/data/strategy.ts';
import { run as vaults } from '../../src/cli/commands/data/vaults.ts';
import type { Context } from '../../src/cli/context.ts';
import { jsonBodies, runCaptured, sandboxTime, useCannedServer } from '../helpers/run-context.ts';

/**
 * The data verbs' run() against a real HTTP server on port 0 answering canned bodies with
 * values as large as a live service's (a million USDC, 8-digit blocks, long names): each
 * human line fits 80 columns, and the logic of each verb (totals, requests, the APY now).
 */

const USER = '0x000000000000000000000000000000000000dEaD';
const MODERATE = '0x0763726B9227D70D227b16E79D47542c2194279C';
const CONFIGURABLE = '0x375b27a37D2dbAf7A38C706aB8Dc500E3102b396';
const NOW = Date.parse('2026-11-28T12:00:00Z') / 1000;

const vaultItem = (name: string, address: string, tvl: string, extra: object = {}) => ({
  address,
  name,
  symbol: 'avX',
  tvl,
  tvlUsd: Number(tvl) / 1e6,
  apy: 15.123456,
  riskLevel: 'conservative',
  strategies: 12,
  isERC7540: false,
  fulfillmentDelay: null,
  createdAt: '2026-01-01T00:00:00Z',
  ...extra,
});

const VAULT_LIST = {
  vaults: [
    vaultItem('Moderate USDC Vault', MODERATE, '1234567123456'),
    vaultItem('Configurable USDC Vault', CONFIGURABLE, '7000000', {
      isERC7540: true,
      fulfillmentDelay: 86_400,
    }),
    // A live service's vault whose name holds no vault id.
    vaultItem('Delta Neutral Basis Trade Vault', `0x${'ab'.repeat(20)}`, '0'),
  ],
  totalTvl: '9999999999999',
  totalTvlUsd: 9_999_999.999999,
};

const points = Array.from({ length: 90 }, (_, i) => ({
  timestamp: new Date((NOW - (89 - i) * 86_400) * 1000).toISOString().replace('.000Z', 'Z'),
  tvl: String(1_000_000_000_000 + i * 1_000_000),
  apy: i === 89 ? 0.104 : 8,
  pricePerShare: '1000438',
}));

const BODIES: Record<string, unknown> = {
  '/v1/vaults': VAULT_LIST,
  [`/v1/vaults/${MODERATE}`]: {
    ...vaultItem('Moderate USDC Vault', MODERATE, '1234567123456'),
    asset: CONFIGURABLE,
    totalShares: '1234000000000',
    pricePerShare: '1000438',
    apy: { current: 7.999825, '7d': 2.285664, '30d': 0.533, inception: 0.04 },
    fees: { management: 0, performance: 0, hurdle: 0 },
    strategies: [],
  },
  [`/v1/vaults/${MODERATE}/history`]: {
    address: MODERATE,
    period: '90d',
    interval: '1d',
    points,
  },
  [`/v1/users/${USER}/positions`]: {
    address: USER,
    positions: [
      {
        vault: MODERATE,
        vaultName: 'Moderate USDC Vault',
        shares: '10000500000',
        value: '10000512345',
        pnl: '-12345678',
        pnlPercent: -0.123456,
        depositedAt: '2026-11-01T08:00:00Z',
        pendingDeposit: '0',
        claimableDeposit: '0',
        pendingRedeem: '0',
        claimableRedeem: '0',
      },
      {
        vault: CONFIGURABLE,
        vaultName: 'Configurable USDC Vault',
        shares: '0',
        value: '0',
        pnl: '0',
        pnlPercent: 0,
        depositedAt: null,
        pendingDeposit: '2500000000',
        claimableDeposit: '0',
        pendingRedeem: '0',
        claimableRedeem: '1500000',
      },
    ],
  },
  '/v1/strategies': {
    strategies: [
      {
        id: `0x${'3f'.repeat(32)}`,
        name: 'Momentum Alpha with a name of a hundred characters, as the registry allows',
        agentName: 'Research Agent',
        vault: MODERATE,
        status: 'evolution',
        allocation: 0.333333,
        apy: -12.345678,
        riskScore: 4,
        sharpeRatio: -1.8734567,
        maxDrawdown: 33.212345,
      },
    ],
  },
  [`/v1/strategies/0x${'3f'.repeat(32)}/performance`]: {
    id: `0x${'3f'.repeat(32)}`,
    name: 'Momentum Alpha',
    status: 'live',
    apy: 12.31,
    sharpeRatio: 1.87,
    maxDrawdown: 3.2,
    returns: Array.from({ length: 120 }, (_, i) => ({
      timestamp: new Date((NOW - (120 - i) * 86_400) * 1000).toISOString(),
      value: i % 7 === 0 ? -0.5 : 0.2,
    })),
  },
  '/v1/nodes': {
    nodes: [
      {
        id: '5b3c2d1e-0000-4000-8000-000000000000',
        name: 'A research node with a long operator-given name',
        operator: MODERATE,
        status: 'offline',
        blockNumber: 18_234_567,
        lastSeen: '2026-11-28T11:00:00Z',
        latencyMs: 123.456789,
        version: 'reth/v1.2.3-custom-build',
      },
    ],
  },
};

const server = useCannedServer(jsonBodies(BODIES, 'GET '), sandboxTime(NOW));
const dir = mkdtempSync(join(tmpdir(), 'agentctl-data-tables-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Runs one verb's run() with a context on the canned server; its stdout. */
async function output<O>(
  verb: (options: O, context: Context) => Promise<void>,
  options: O,
): Promise<string> {
  return (await runCaptured(verb, options, { dataUrl: server.url }, { AGENTCTL_CONFIG_DIR: dir }))
    .stdout;
}

const tooWide = (text: string) => text.split('\n').filter((line) => [...line].length > 80);

describe('data tables with live-sized values', () => {
  it('vaults: within 80 columns, the total of the vaults shown, the service total labelled', async () => {
    const text = await output(vaults, { risk: 'conservative' });
    expect(tooWide(text)).toEqual([]);
    expect(text).toMatch(
      /│ moderate +│ 1234567\.123456 USDC +│ 15\.1235 % +│ conservative +│ no +│/,
    );
    expect(text).toMatch(/│ configurable +│ .*│ yes, 86400 s +│/);
    expect(text).toMatch(/│ Delta Neutr… │ 0 USDC +│/);
    expect(text).toContain(
      'total tvl 1234574.123456 USDC (1234574123456 raw) in the 3 vaults shown\n',
    );
    expect(text).toContain('all vaults 9999999.999999 USDC (9999999999999 raw)\n');
    const wide = await output(vaults, { wide: true });
    expect(wide).toContain(MODERATE);
    expect(wide).toContain('Moderate USDC Vault');
    expect(wide).not.toContain('all vaults');
  });

  it('positions: within 80 columns, requests listed under the table', async () => {
    const text = await output(positions, { address: USER });
    expect(tooWide(text)).toEqual([]);
    expect(text).toMatch(
      /│ moderate +│ 10000\.512345 USDC +│ -12\.345678 USDC +│ 2026-11-01T08:00:00Z │/,
    );
    expect(text).toMatch(/│ +│ 10000\.5 shares +│ -0\.1235 % +│ \(27 d ago\) +│/);
    expect(text).toContain('configurable: pending deposit 2500 USDC\n');
    expect(text).toContain('configurable: claimable redeem 1.5 shares\n');
    const wide = await output(positions, { address: USER, wide: true });
    expect(wide).toContain('-12.345678 USDC (12345678 raw)');
    expect(wide).toContain(CONFIGURABLE);
  });

  it('strategies and nodes: within 80 columns, names clipped, --wide whole', async () => {
    const list = await output(strategies, {});
    expect(tooWide(list)).toEqual([]);
    expect(list).toMatch(
      /│ Momentum Alpha … │ evolution │ -12\.3457 % │ -1\.87 +│ 33\.2123 % │ 0x3f3f…3f3f │/,
    );
    const wideList = await output(strategies, { wide: true });
    expect(wideList).toContain(`0x${'3f'.repeat(32)}`);
    expect(wideList).toContain('as the registry allows');
    const nodeTable = await output(nodes, {});
    expect(tooWide(nodeTable)).toEqual([]);
    expect(nodeTable).toMatch(
      /│ offline +│ 18234567 │ 2026-11-28T11:00:00Z │\n│ +│ 123\.5 ms +│ +│ \(1 h ago\) +│/,
    );
    expect(await output(nodes, { wide: true })).toContain('reth/v1.2.3-custom-build');
  });

  it('history: the vault named, a time axis, and the APY now of the vault, not of the last point', async () => {
    const text = await output(history, { vault: MODERATE, period: '90d', interval: '1d' });
    expect(tooWide(text)).toEqual([]);
    expect(text).toMatch(/^vault +Moderate USDC Vault \(moderate\)$/m);
    expect(text).toMatch(/^points +90, one per 1d over 90d$/m);
    expect(text).toMatch(/^from +2026-08-31T12:00:00Z \(89 d ago\)$/m);
    expect(text).toMatch(/^to +2026-11-28T12:00:00Z \(now\)$/m);
    expect(text.match(/^ +2026-08-31T12:00Z +2026-11-28T12:00Z$/gm)).toHaveLength(2);
    expect(text).toMatch(/^apy now +7\.9998 %$/m);
    expect(text).not.toContain('0.104 %');
  });

  it('strategy: its span with hints, and a chart with a time axis, within 80 columns', async () => {
    const text = await output(strategy, { id: `0x${'3f'.repeat(32)}` });
    expect(tooWide(text)).toEqual([]);
    expect(text).toMatch(/^days +120$/m);
    expect(text).toMatch(/^from +2026-07-31T12:00:00Z \(120 d ago\)$/m);
    expect(text).toMatch(/^to +2026-11-27T12:00:00Z \(1 d ago\)$/m);
    expect(text).toMatch(/│.*\n +└─+\n +2026-07-31 +2026-11-27$/m);
  });
});
