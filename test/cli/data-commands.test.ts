import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../helpers/cli.ts';
import {
  registerOver,
  requestOver,
  type ServeProcess,
  startServe,
  until,
} from '../helpers/serve.ts';
import { adminOverHttp, useSnapshot } from '../helpers/snapshot.ts';

const ADMIN = 'data-commands-admin';
let sandbox: ServeProcess;
let dir: string;
let apiKey: string;
let agentAddress: string;
let strategyId: string;

beforeAll(async () => {
  sandbox = await startServe([
    '--admin-token',
    ADMIN,
    '--log-level',
    'warn',
    '--rate-limit',
    'off',
  ]);
  dir = mkdtempSync(join(tmpdir(), 'agentctl-data-cli-'));
  ({ apiKey } = await registerOver(sandbox.url, 'Data Agent'));
  const wallet = await requestOver(
    sandbox.url,
    ADMIN,
    'GET',
    '/api/v1/agent/wallet',
    undefined,
    apiKey,
  );
  agentAddress = wallet.body.agent_address;
  for (const [vault_id, amount_usdc] of [
    ['moderate', 20],
    ['configurable', 7],
  ] as const) {
    const deposit = await requestOver(
      sandbox.url,
      ADMIN,
      'POST',
      '/api/v1/agent/vault/deposit',
      { vault_id, amount_usdc },
      apiKey,
    );
    expect(deposit.status).toBe(200);
  }
  const strategy = await requestOver(
    sandbox.url,
    ADMIN,
    'POST',
    '/api/v1/agent/strategy/submit',
    {
      name: 'Momentum Alpha with a name longer than a narrow column',
      description: 'A strategy for the data tables.',
    },
    apiKey,
  );
  expect(strategy.status).toBe(200);
  strategyId = strategy.body.strategy_id;
  const advanced = await requestOver(sandbox.url, ADMIN, 'POST', '/sandbox/clock/advance', {
    seconds: 2 * 86_400,
  });
  expect(advanced.status).toBe(200);
  // The sandbox fulfils the request, then claims it for the agent, in the background: the
  // setup is done once both deposits and the claim are indexed.
  await until(async () => {
    const response = await fetch(`${sandbox.url}/v1/users/${agentAddress}/transactions`);
    return ((await response.json()) as { total: number }).total === 3;
  }, 10_000);
});
afterAll(async () => {
  sandbox.child.kill('SIGTERM');
  await sandbox.exited;
  rmSync(dir, { recursive: true, force: true });
});
// The setup above, as a snapshot. Some tests change what others read (a deposit request, the
// fulfilment delay, a node): a test that reads any of those restores the setup first, so that
// it reads the setup's whatever ran before it.
const setup = useSnapshot(
  adminOverHttp(() => sandbox.url, ADMIN),
  'data-setup',
);

const cli = (args: string[], env: NodeJS.ProcessEnv = {}) =>
  runCli(args, {
    AGENTCTL_CONFIG_DIR: dir,
    AGENTCTL_BASE_URL: sandbox.url,
    AGENTCTL_DATA_URL: sandbox.url,
    AGENTCTL_API_KEY: apiKey,
    ...env,
  });

describe('agentctl data against serve', () => {
  it('vaults: a table, and --json as the service sent it', async () => {
    await setup.restore();
    const human = await cli(['data', 'vaults', '--sort', 'tvl']);
    expect(human.code).toBe(0);
    expect(human.stdout).toMatch(/│ moderate +│/);
    expect(human.stdout).toMatch(
      /│ configurable +│ 7 USDC +│ [\d.]+ % +│ moderate +│ yes, 3600 s +│/,
    );
    expect(human.stdout).toMatch(/^total tvl [\d.]+ USDC \(\d+ raw\) in the 6 vaults shown$/m);
    const json = await cli(['--json', 'data', 'vaults', '--risk', 'moderate']);
    expect(json.code).toBe(0);
    const body = JSON.parse(json.stdout);
    const direct = await (await fetch(`${sandbox.url}/v1/vaults?riskLevel=moderate`)).json();
    expect(body).toEqual(direct);
    expect(
      body.vaults.every((vault: { riskLevel: string }) => vault.riskLevel === 'moderate'),
    ).toBe(true);
  });

  it('vault and history take a vault id; history draws charts', async () => {
    const vault = await cli(['data', 'vault', 'moderate']);
    expect(vault.code).toBe(0);
    expect(vault.stdout).toMatch(/^price per share\s+[\d.]+ USDC \(\d+ raw\)$/m);
    const history = await cli(['data', 'history', 'moderate', '--period', '7d']);
    expect(history.code).toBe(0);
    expect(history.stdout).toContain('TVL (USDC)');
    expect(history.stdout).toContain('APY over each 1d (%)');
    expect(history.stdout).toMatch(/│[ ▁▂▃▄▅▆▇█]+$/m);
    const json = await cli(['--json', 'data', 'history', 'moderate', '--interval', '1w']);
    expect(JSON.parse(json.stdout)).toMatchObject({ period: '30d', interval: '1w' });
    const unknown = await cli(['data', 'vault', 'nonesuch']);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toMatch(/must be one of conservative, moderate/);
    const nearMiss = await cli(['data', 'history', 'Moderat']);
    expect(nearMiss.code).toBe(2);
    expect(nearMiss.stderr).toContain('did you mean moderate?');
    const missing = await cli(['data', 'vault', `0x${'12'.repeat(20)}`]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain('VAULT_NOT_FOUND');
  });

  it('positions and transactions default to the agent’s wallet, and follow the ERC-7540 request', async () => {
    await setup.restore();
    const positions = await cli(['--json', 'data', 'positions']);
    expect(positions.code).toBe(0);
    const body = JSON.parse(positions.stdout);
    expect(body.address).toBe(agentAddress);
    expect(body.positions).toHaveLength(2);
    const transactions = await cli(['data', 'transactions', '--type', 'deposit_request']);
    expect(transactions.code).toBe(0);
    // The status under the type.
    expect(transactions.stdout).toMatch(/│ deposit_request +│.*\n│ .*│ claimed +│/);
    const all = await cli(['--json', 'data', 'transactions', agentAddress, '--all']);
    const every = JSON.parse(all.stdout);
    expect(every.transactions.length).toBe(every.total);
    expect(every.total).toBe(3);
    const page = await cli(['--json', 'data', 'transactions', '--limit', '1', '--offset', '1']);
    expect(JSON.parse(page.stdout)).toMatchObject({ limit: 1, offset: 1, total: 3 });
    const bad = await cli(['data', 'transactions', '--limit', '500']);
    expect(bad.code).toBe(2);
    const noKey = await cli(['data', 'positions'], { AGENTCTL_API_KEY: '' });
    expect(noKey.code).toBe(2);
    expect(noKey.stderr).toMatch(/no address given/);
  });

  it('deposit configurable says the request is pending, when it is fulfilled, and how to follow it', async () => {
    const deposit = await cli(['deposit', 'configurable', '3', '--yes']);
    expect(deposit.code).toBe(0);
    expect(deposit.stdout).toMatch(
      /^requested a deposit of 3 USDC \(3000000 raw\) into .*: pending$/m,
    );
    expect(deposit.stdout).toMatch(/^request id {2}\d+$/m);
    expect(deposit.stdout).toMatch(
      /^fulfilled {3}at \d{4}-\d\d-\d\dT[\d:]+Z \((in \d+ \w+|now)\) by the sandbox's clock/m,
    );
    expect(deposit.stdout).toContain('agentctl data transactions');
    const json = await cli(['--json', 'deposit', 'configurable', '1', '--yes']);
    expect(JSON.parse(json.stdout)).toMatchObject({
      status: 'pending',
      request_id: expect.any(String),
    });
  });

  it('stats, nodes and strategies', async () => {
    await setup.restore();
    const stats = await cli(['data', 'stats']);
    expect(stats.code).toBe(0);
    expect(stats.stdout).toMatch(/^agents\s+1$/m);
    const nodes = await cli(['--json', 'data', 'nodes']);
    // The sandbox's own node alone: the setup registered none.
    expect(JSON.parse(nodes.stdout).nodes).toEqual([
      expect.objectContaining({ id: 'sandbox', status: 'online' }),
    ]);
    const strategies = await cli(['data', 'strategies', '--status', 'live']);
    expect(strategies.code).toBe(0);
    expect(strategies.stdout).toContain('no strategies');
    const wrong = await cli(['data', 'strategy', '0x12']);
    expect(wrong.code).toBe(2);
  });

  it('sandbox fulfillment-delay and sandbox node drive the admin API', async () => {
    const admin = { AGENTCTL_ADMIN_TOKEN: ADMIN };
    const delay = await cli(['--json', 'sandbox', 'fulfillment-delay', '120'], admin);
    expect(delay.code).toBe(0);
    expect(JSON.parse(delay.stdout)).toMatchObject({
      vault_id: 'configurable',
      fulfillment_delay: 120,
    });
    const vaults = await cli(['--json', 'data', 'vaults']);
    const configurable = JSON.parse(vaults.stdout).vaults.find(
      (vault: { isERC7540: boolean }) => vault.isERC7540,
    );
    expect(configurable.fulfillmentDelay).toBe(120);
    expect((await cli(['sandbox', 'fulfillment-delay', '-5'], admin)).code).toBe(2);
    const node = await cli(
      ['--json', 'sandbox', 'node', 'CLI node', `0x${'ef'.repeat(20)}`],
      admin,
    );
    expect(node.code).toBe(0);
    const { node_key } = JSON.parse(node.stdout);
    const nodes = await cli(['--json', 'data', 'nodes'], { AGENTCTL_API_KEY: node_key });
    expect(JSON.parse(nodes.stdout).nodes.map((n: { name: string }) => n.name)).toContain(
      'CLI node',
    );
  });

  it('--data-url wins over AGENTCTL_DATA_URL, and a bad one is a usage error', async () => {
    const flag = await cli(['data', '--data-url', sandbox.url, 'stats'], {
      AGENTCTL_DATA_URL: 'http://127.0.0.1:9',
    });
    expect(flag.code).toBe(0);
    const bad = await cli(['data', 'stats'], { AGENTCTL_DATA_URL: 'ftp://x' });
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/data URL/);
    // The data URL, not the base URL, is asked.
    const elsewhere = await cli(['data', 'stats'], { AGENTCTL_DATA_URL: 'http://127.0.0.1:9' });
    expect(elsewhere.code).toBe(6);
  });
});

/** The lines of a human output wider than 80 columns (characters, as a terminal counts them). */
const wideLines = (text: string) => text.split('\n').filter((line) => [...line].length > 80);

describe('agentctl data in one voice (issue 22 §3)', () => {
  it('every table fits 80 columns; --wide gives the whole values', async () => {
    const verbs = [
      ['vaults'],
      ['vaults', '--risk', 'moderate'],
      ['vault', 'moderate'],
      ['history', 'moderate'],
      ['history', 'configurable', '--period', '7d', '--interval', '1h'],
      ['strategies'],
      ['strategy', strategyId],
      ['positions'],
      ['transactions'],
      ['stats'],
      ['nodes'],
    ];
    for (const verb of verbs) {
      const result = await cli(['data', ...verb]);
      expect(result.code, verb.join(' ')).toBe(0);
      expect(result.stdout.split('\n').length, verb.join(' ')).toBeGreaterThan(3);
      expect(wideLines(result.stdout), verb.join(' ')).toEqual([]);
    }
    const vaults = JSON.parse((await cli(['--json', 'data', 'vaults'])).stdout).vaults;
    const moderate = vaults.find((vault: { name: string }) => /moderate/i.test(vault.name));
    // Narrow tables name a vault by its id; --wide shows its address whole.
    const narrow = await cli(['data', 'transactions']);
    expect(narrow.stdout).not.toContain(moderate.address);
    expect(narrow.stdout).toMatch(/│ moderate +│/);
    const wide = await cli(['data', 'transactions', '--wide']);
    expect(wide.stdout).toContain(moderate.address);
    expect(wide.stdout).toMatch(/│ 0x[0-9a-f]{64} │/);
    expect(wide.stdout).toMatch(/│ 20 USDC \(20000000 raw\) +│/);
    expect((await cli(['data', 'vaults', '--wide'])).stdout).toContain(moderate.address);
    expect((await cli(['data', 'positions', '--wide'])).stdout).toContain(moderate.address);
    expect((await cli(['data', 'strategies', '--wide'])).stdout).toContain(strategyId);
    expect((await cli(['data', 'strategies'])).stdout).toContain(
      `${strategyId.slice(0, 6)}…${strategyId.slice(-4)}`,
    );
  });

  it('times are ISO 8601 with a hint by the sandbox clock', async () => {
    // The deposits were made, then the clock advanced two days.
    const transactions = await cli(['data', 'transactions', '--type', 'deposit']);
    expect(transactions.stdout).toMatch(
      /│ \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ +│ deposit +│.*\n│ \(2 d ago\) +│ fulfilled +│/,
    );
    const positions = await cli(['data', 'positions']);
    expect(positions.stdout).toMatch(/│ \(2 d ago\) +│/);
    const stats = await cli(['data', 'stats']);
    expect(stats.stdout).toMatch(
      /^updated at +\d{4}-\d\d-\d\dT[\d:]+Z \((now|\d+ (s|min|h) ago)\)$/m,
    );
    const wide = await cli(['data', 'transactions', '--type', 'deposit', '--wide']);
    expect(wide.stdout).toMatch(/│ \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ \(2 d ago\) +│ deposit +│/);
  });

  it('history names the vault, shows the APY data vault shows, and labels its time axis', async () => {
    const history = await cli(['data', 'history', 'moderate']);
    expect(history.code).toBe(0);
    expect(history.stdout).toMatch(/^vault +Moderate USDC Vault \(moderate\)$/m);
    expect(history.stdout).toMatch(/^from +\d{4}-\d\d-\d\dT[\d:]+Z \(\d+ d ago\)$/m);
    // Under each chart, an axis and its first and last times.
    expect(
      history.stdout.match(
        /│.*\n +└─+\n +\d{4}-\d\d-\d\dT\d\d:\d\dZ +\d{4}-\d\d-\d\dT\d\d:\d\dZ$/gm,
      ),
    ).toHaveLength(2);
    const vault = await cli(['data', 'vault', 'moderate']);
    const apyNow = (text: string) => /^apy now +(.+)$/m.exec(text)?.[1];
    expect(apyNow(vault.stdout)).toMatch(/^[\d.]+ %$/);
    expect(apyNow(history.stdout)).toBe(apyNow(vault.stdout));
    // The same quantity: the vault detail's apy.current, in percent.
    const detail = JSON.parse((await cli(['--json', 'data', 'vault', 'moderate'])).stdout);
    expect(apyNow(vault.stdout)).toBe(`${Number(detail.apy.current.toFixed(4))} %`);
  });

  it('a filtered vault list totals the vaults it shows', async () => {
    await setup.restore();
    const filtered = await cli(['data', 'vaults', '--risk', 'moderate', '--min-tvl', '10']);
    expect(filtered.code).toBe(0);
    const shown = JSON.parse(
      (await cli(['--json', 'data', 'vaults', '--risk', 'moderate', '--min-tvl', '10'])).stdout,
    );
    expect(shown.vaults).toHaveLength(1);
    const sum = shown.vaults.reduce(
      (total: bigint, v: { tvl: string }) => total + BigInt(v.tvl),
      0n,
    );
    expect(filtered.stdout).toMatch(
      new RegExp(`^total tvl [\\d.]+ USDC \\(${sum} raw\\) in the vault shown$`, 'm'),
    );
    // The service's total, of every vault, is labelled as such.
    expect(filtered.stdout).toMatch(
      new RegExp(`^all vaults [\\d.]+ USDC \\(${shown.totalTvl} raw\\)$`, 'm'),
    );
    expect(BigInt(shown.totalTvl)).toBeGreaterThan(sum);
    const none = await cli(['data', 'vaults', '--min-tvl', '1000000']);
    expect(none.stdout).toBe('no vaults match\n');
  });
});
