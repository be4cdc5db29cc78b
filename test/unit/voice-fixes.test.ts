import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { run as dataVault } from '../../src/cli/commands/data/vault.ts';
import { run as lookup } from '../../src/cli/commands/lookup.ts';
import { run as positions } from '../../src/cli/commands/positions.ts';
import { run as register } from '../../src/cli/commands/register.ts';
import { run as vaults } from '../../src/cli/commands/vaults.ts';
import { contextFrom, type GlobalOptions } from '../../src/cli/context.ts';
import { transactionLine, vaultLine } from '../../src/cli/watch.ts';
import { openConfig } from '../../src/config/profiles.ts';
import { openKeystoreDir } from '../../src/keystore/store.ts';
import { cannedServer, runCaptured, sandboxTime, useCannedServer } from '../helpers/run-context.ts';

/**
 * The command line in one voice (issue 22, a reviewer's findings): a unit on every amount,
 * a relative hint on every time.
 */

const VAULT = '0x0763726B9227D70D227b16E79D47542c2194279C';
const WALLET = '0xC45a0e213960d2DfaFe83B3E62b0984D990059C6';
const NOW = 1_800_000_000;

const server = useCannedServer(
  {
    'GET /api/v1/agent/vault/positions': {
      body: {
        positions: [
          {
            vault_id: 'moderate',
            vault_name: 'Moderate Vault',
            vault_address: VAULT,
            shares: '204.999999',
            value_usdc: '205.5',
          },
        ],
      },
    },
    [`GET /v1/vaults/${VAULT}`]: {
      body: {
        address: VAULT,
        name: 'Moderate USDC Vault',
        symbol: 'avM',
        asset: VAULT,
        tvl: '204999999',
        tvlUsd: 204.999999,
        totalShares: '204999999',
        pricePerShare: '1000000',
        apy: { current: 1, '7d': 1, '30d': 1, inception: 1 },
        riskLevel: 'moderate',
        fees: { management: 0, performance: 0, hurdle: 0 },
        isERC7540: false,
        fulfillmentDelay: null,
        strategies: [],
        createdAt: '2026-01-01T00:00:00Z',
      },
    },
    'GET /api/v1/agent/auth/lookup': {
      body: {
        registered: true,
        agent_name: 'Clock Bot',
        tier: 'unverified',
        status: 'active',
        strategies_submitted: 0,
        performance_score: 0,
        api_key_prefix: 'agk_12345678',
        created_at: new Date((NOW - 86_400) * 1000 + 758).toISOString(),
      },
    },
  },
  sandboxTime(NOW),
);

const dir = mkdtempSync(join(tmpdir(), 'agentctl-voice-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const env = () => ({ AGENTCTL_CONFIG_DIR: dir });

describe('every amount carries its unit', () => {
  it('positions --wide: shares', async () => {
    const { stdout } = await runCaptured(
      positions,
      { wide: true },
      { baseUrl: server.url, apiKey: 'agk_test' },
      env(),
    );
    expect(stdout).toContain('204.999999 shares (204999999 raw)');
  });

  it('data vault: total shares', async () => {
    const { stdout } = await runCaptured(
      dataVault,
      { vault: VAULT },
      { baseUrl: server.url },
      env(),
    );
    expect(stdout).toMatch(/^total shares\s+204\.999999 shares \(204999999 raw\)$/m);
  });
});

describe('every time carries a relative hint', () => {
  it("lookup's created_at: ISO 8601 in whole seconds, from the service's clock", async () => {
    const { stdout } = await runCaptured(
      lookup,
      { wallet: WALLET },
      { baseUrl: server.url },
      env(),
    );
    expect(stdout).toMatch(/^created_at\s+2027-01-14T08:00:00Z \(1 d ago\)$/m);
  });
});

describe('a retry under --json', () => {
  /** Vaults after one 503: a single short retry. */
  async function onceUnavailable(globals: GlobalOptions) {
    let calls = 0;
    const flaky = await cannedServer(() =>
      calls++ === 0
        ? { status: 503, body: { error: 'starting up' } }
        : { body: { vaults: [], total: 0 } },
    );
    try {
      return await runCaptured(vaults, {}, { baseUrl: flaky.url, ...globals }, env());
    } finally {
      await flaky.close();
    }
  }

  it('is said on stderr by default, so a wait does not look like a hang', async () => {
    expect((await onceUnavailable({})).stderr).toMatch(
      /^agentctl: retrying in \d+ ms \(HTTP 503\)$/m,
    );
  });

  it('is not said with --json: stderr is kept to the one error object', async () => {
    const said = await onceUnavailable({ json: true });
    expect(said.stderr).toBe('');
    expect(JSON.parse(said.stdout)).toEqual({ vaults: [], total: 0 });
  });

  it('is said with --json --verbose', async () => {
    expect((await onceUnavailable({ json: true, verbose: true })).stderr).toMatch(
      /^agentctl: retrying in \d+ ms \(HTTP 503\)$/m,
    );
  });
});

describe('a profile key withheld from another service', () => {
  /** The refusal, with the profile's key issued for another service than `globals`/`env` name. */
  async function refusal(globals: GlobalOptions, env: NodeJS.ProcessEnv): Promise<string> {
    const home = mkdtempSync(join(tmpdir(), 'agentctl-voice-key-'));
    try {
      await openConfig({ AGENTCTL_CONFIG_DIR: home }).set('default', {
        base_url: 'http://127.0.0.1:9',
        api_key: 'agk_bound',
      });
      const context = contextFrom(globals, { AGENTCTL_CONFIG_DIR: home, ...env });
      try {
        await context.authenticatedClient();
        return 'not refused';
      } catch (error) {
        return (error as Error).message;
      } finally {
        await context.close();
      }
    } finally {
      rmSync(home, { recursive: true, force: true });
    }
  }

  it('names the flag the URL came from', async () => {
    const said = await refusal({ baseUrl: 'http://127.0.0.1:18411' }, {});
    expect(said).toMatch(/, or drop --base-url$/);
  });

  it('names the variable the URL came from, not a flag that was never given', async () => {
    const said = await refusal({}, { AGENTCTL_BASE_URL: 'http://127.0.0.1:18411' });
    expect(said).toMatch(/, or unset AGENTCTL_BASE_URL \(it names this service\)$/);
    expect(said).not.toContain('--base-url');
  });
});

describe('register checks that an agentctl service answers before it unlocks the key', () => {
  it.each([
    [
      'a web server answering HTML',
      { status: 404, text: '<html>404 Not Found</html>', headers: { 'content-type': 'text/html' } },
      /the answer is not JSON/,
    ],
    [
      'an API without /health',
      { status: 404, body: { message: 'Not Found' } },
      /answers GET \/health with 404: is this an agentctl service\?/,
    ],
    ['an answer of another shape', { body: { ok: true } }, /unexpected answer from GET \/health/],
  ] as const)(
    '%s',
    async (_what, answer, said) => {
      const other = await cannedServer(() => answer);
      const home = mkdtempSync(join(tmpdir(), 'agentctl-voice-register-'));
      try {
        // A wrong password: unlocking first would fail with it (exit 4), not with the service.
        await openKeystoreDir(join(home, 'keystores')).create(
          'signer',
          Buffer.alloc(32, 7),
          'right',
        );
        const failure = runCaptured(
          register,
          { name: 'Static Bot', key: 'signer', yes: true },
          { baseUrl: other.url },
          { AGENTCTL_CONFIG_DIR: home, AGENTCTL_KEYSTORE_PASSWORD: 'wrong' },
        );
        await expect(failure).rejects.toThrow(said);
        expect(other.requests.map((request) => request.url.pathname)).toEqual(['/health']);
      } finally {
        await other.close();
        rmSync(home, { recursive: true, force: true });
      }
    },
    30_000,
  );
});

describe('watch lines fit 80 columns; --wide gives every value whole', () => {
  const transaction = {
    hash: `0x${'ab'.repeat(32)}`,
    type: 'DEPOSIT_REQUEST',
    status: 'PENDING',
    amount: '1234567123456',
    shares: null,
    user: '0x000000000000000000000000000000000000dEaD',
    timestamp: '2031-01-02T03:04:05Z',
    vault: { address: VAULT, name: 'Configurable USDC Vault with a long name' },
  };
  const vault = {
    address: VAULT,
    name: 'Delta Neutral Basis Trade Vault',
    tvl: '1234567123456',
    tvlUsd: 1_234_567.123456,
    totalShares: '1234567123456',
    pricePerShare: '1000438',
    apy: { current: -12.345678 },
    updatedAt: '2031-01-02T03:04:05Z',
  };

  it('watch transactions: the user and the hash shortened, the raw units left out', () => {
    const lines = transactionLine(transaction).split('\n');
    for (const line of lines) expect(line.length).toBeLessThanOrEqual(80);
    expect(lines).toEqual([
      '2031-01-02T03:04:05Z  deposit_request  pending  1234567.123456 USDC',
      '  Configurable USDC Vault with a …  user 0x0000…dEaD  tx 0xabab…abab',
    ]);
    const wide = transactionLine(transaction, true);
    expect(wide).toContain(`user ${transaction.user}  tx ${transaction.hash}`);
    expect(wide).toContain('1234567.123456 USDC (1234567123456 raw)');
  });

  it('a redeem request counts shares, in shares', () => {
    const redeem = { ...transaction, type: 'REDEEM_REQUEST', shares: '2500000' };
    expect(transactionLine(redeem)).toContain('redeem_request  pending  2.5 shares\n');
    expect(transactionLine(redeem, true)).toContain('2.5 shares (2500000 raw)');
  });

  it('watch vault', () => {
    const line = vaultLine(vault);
    expect(line.length).toBeLessThanOrEqual(80);
    expect(line).toBe(
      '2031-01-02T03:04:05Z  tvl 1234567.123456 USDC  price 1.000438  apy -12.3457 %',
    );
    expect(vaultLine(vault, true)).toContain('Delta Neutral Basis Trade Vault');
  });
});
