import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { type DataTransactionsOptions, run } from '../../src/cli/commands/data/transactions.ts';
import { runCaptured, sandboxTime, useCannedServer } from '../helpers/run-context.ts';

/**
 * `data transactions` run() against a real HTTP server on port 0 answering canned pages of
 * the data API, without the binary: --all pages, the total, --json with --all, and the
 * narrow table.
 */

const USER = '0x000000000000000000000000000000000000dEaD';
const VAULTS = {
  moderate: '0x0763726B9227D70D227b16E79D47542c2194279C',
  configurable: '0x375b27a37D2dbAf7A38C706aB8Dc500E3102b396',
};
const TOTAL = 250;
/** The sandbox's clock in the answers: two days after the newest transaction. */
const NEWEST = Date.parse('2026-11-26T11:20:12Z') / 1000;
const SANDBOX_NOW = NEWEST + 2 * 86_400;

/** Transaction number i, newest first, an hour apart. */
function transaction(i: number) {
  const request = i % 2 === 1;
  return {
    hash: `0x${i.toString(16).padStart(64, '0')}`,
    type: request ? 'deposit_request' : 'deposit',
    vault: request ? VAULTS.configurable : VAULTS.moderate,
    user: USER,
    amount: String(1_000_000_000 + i),
    shares: String(999_000_000 + i),
    status: request ? 'claimed' : 'fulfilled',
    timestamp: new Date((NEWEST - i * 3600) * 1000).toISOString().replace('.000Z', 'Z'),
    blockNumber: 1000 - i,
    logIndex: 0,
    // Not in the contract: --json keeps what the service sent.
    extra: 'kept',
  };
}

function vaultItem(name: string, address: string) {
  return {
    address,
    name,
    symbol: 'avX',
    tvl: '1000000',
    tvlUsd: 1,
    apy: 8,
    riskLevel: 'moderate',
    strategies: 0,
    isERC7540: false,
    fulfillmentDelay: null,
    createdAt: '2026-01-01T00:00:00Z',
  };
}

let dir: string;
/** Transactions that arrive once the first page has been served (newest first). */
let arriving: number[] = [];
let arrived: number[] = [];

const server = useCannedServer(
  {
    'GET /v1/vaults': {
      body: {
        vaults: [
          vaultItem('Moderate USDC Vault', VAULTS.moderate),
          vaultItem('Configurable USDC Vault', VAULTS.configurable),
        ],
        totalTvl: '2000000',
        totalTvlUsd: 2,
        extra: 'kept',
      },
    },
    [`GET /v1/users/${USER}/transactions`]: ({ url: asked }) => {
      const limit = Number(asked.searchParams.get('limit') ?? 50);
      const offset = Number(asked.searchParams.get('offset') ?? 0);
      const every = [...arrived, ...Array.from({ length: TOTAL }, (_, i) => i)];
      const transactions = every.slice(offset, offset + limit).map(transaction);
      // The newcomers land after this page: the next one's offsets are shifted by them.
      arrived = [...arriving, ...arrived];
      arriving = [];
      return {
        body: {
          address: USER,
          transactions,
          total: every.length,
          limit,
          offset,
          extra: 'kept',
        },
      };
    },
  },
  sandboxTime(SANDBOX_NOW),
);
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'agentctl-data-transactions-'));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));
beforeEach(() => {
  server.requests.length = 0;
  arriving = [];
  arrived = [];
});

async function transactions(options: DataTransactionsOptions, json = false) {
  return runCaptured(
    run,
    { address: USER, ...options },
    { json, dataUrl: server.url },
    { AGENTCTL_CONFIG_DIR: dir },
  );
}

const pagesAsked = () =>
  server.requests
    .map((request) => request.url)
    .filter((asked) => asked.pathname.endsWith('/transactions'))
    .map((asked) => [asked.searchParams.get('limit'), asked.searchParams.get('offset')]);

describe('data transactions run()', () => {
  it('--json --all gathers every page into one body of the same shape, fields as sent', async () => {
    const { stdout, stderr } = await transactions({ all: true }, true);
    expect(pagesAsked()).toEqual([
      ['100', '0'],
      ['100', '100'],
      ['100', '200'],
    ]);
    const body = JSON.parse(stdout);
    expect(body).toMatchObject({ address: USER, total: TOTAL, limit: TOTAL, offset: 0 });
    expect(body.extra).toBe('kept');
    expect(body.transactions).toHaveLength(TOTAL);
    expect(body.transactions.map((tx: { blockNumber: number }) => tx.blockNumber)).toEqual(
      Array.from({ length: TOTAL }, (_, i) => 1000 - i),
    );
    expect(body.transactions[0].extra).toBe('kept');
    expect(stderr).toBe('');
  });

  it('--all keeps each transaction once, and fetches those that arrived while it paged', async () => {
    // Two transactions arrive after the first page: the next pages are shifted by two.
    arriving = [-2, -1];
    const { stdout } = await transactions({ all: true }, true);
    const body = JSON.parse(stdout);
    expect(body.total).toBe(TOTAL + 2);
    expect(body.limit).toBe(TOTAL + 2);
    expect(body.transactions.map((tx: { blockNumber: number }) => tx.blockNumber)).toEqual(
      Array.from({ length: TOTAL + 2 }, (_, i) => 1002 - i),
    );
    // The three pages, then the top again for the newcomers.
    expect(pagesAsked()).toEqual([
      ['100', '0'],
      ['100', '100'],
      ['100', '200'],
      ['100', '0'],
    ]);
  });

  it('--all as a table: every transaction, no "more" hint, each line within 80 columns', async () => {
    const { stdout, stderr } = await transactions({ all: true });
    expect(pagesAsked()).toHaveLength(3);
    // One row per transaction: the type line of each.
    expect(stdout.match(/│ (deposit|deposit_request) +│/g)).toHaveLength(TOTAL);
    expect(stderr).toBe('');
    for (const line of stdout.trimEnd().split('\n')) expect(line.length).toBeLessThanOrEqual(80);
  });

  it('a page: says which part of the total it shows', async () => {
    const { stdout, stderr } = await transactions({ limit: 20, offset: 40 });
    expect(pagesAsked()).toEqual([['20', '40']]);
    expect(stderr).toBe('41 to 60 of 250; --offset or --all for more\n');
    // The vault by its id, the time in ISO 8601 with its hint by the sandbox's clock.
    // Transaction 40: 40 h before the newest, the sandbox's clock 2 d after it.
    expect(stdout).toMatch(
      /│ 2026-11-24T19:20:12Z │ deposit +│ 1000\.00004 USDC +│ moderate +│\n│ \(4 d ago\) +│ fulfilled +│ 999\.00004 shares +│/,
    );
    expect(stdout).not.toContain(VAULTS.moderate);
  });

  it('--wide: every value whole, in one line a row', async () => {
    const { stdout } = await transactions({ limit: 2, wide: true });
    expect(stdout).toContain(VAULTS.configurable);
    expect(stdout).toContain(transaction(1).hash);
    expect(stdout).toContain('1000.000001 USDC (1000000001 raw)');
    expect(stdout).toContain('2026-11-26T10:20:12Z (2 d ago)');
  });

  it('--json with a page prints the body as received', async () => {
    const { stdout } = await transactions({ limit: 3 }, true);
    const body = JSON.parse(stdout);
    expect(body).toMatchObject({ total: TOTAL, limit: 3, offset: 0, extra: 'kept' });
    expect(body.transactions).toHaveLength(3);
  });
});
