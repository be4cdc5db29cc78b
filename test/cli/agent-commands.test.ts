import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../helpers/cli.ts';
import { registerOver, type ServeProcess, startServe } from '../helpers/serve.ts';

const ADMIN = 'agent-commands-admin';
let sandbox: ServeProcess;
let dir: string;
let apiKey: string;
let wallet: string;

beforeAll(async () => {
  sandbox = await startServe([
    '--admin-token',
    ADMIN,
    '--log-level',
    'warn',
    '--rate-limit',
    'off',
  ]);
  dir = mkdtempSync(join(tmpdir(), 'agentctl-agent-cli-'));
  const registered = await registerOver(sandbox.url, 'CLI Agent');
  wallet = registered.account.address;
  apiKey = registered.apiKey;
});
afterAll(async () => {
  sandbox.child.kill('SIGTERM');
  await sandbox.exited;
  rmSync(dir, { recursive: true, force: true });
});

const cli = (args: string[], env: NodeJS.ProcessEnv = {}) =>
  runCli(args, {
    AGENTCTL_CONFIG_DIR: dir,
    AGENTCTL_BASE_URL: sandbox.url,
    AGENTCTL_API_KEY: apiKey,
    AGENTCTL_ADMIN_TOKEN: ADMIN,
    ...env,
  });

describe('agent commands against serve', () => {
  it('wallet: human and --json', async () => {
    const human = await cli(['wallet']);
    expect(human.code).toBe(0);
    // Every amount with its unit, under a readable label.
    expect(human.stdout).toMatch(/^USDC\s+10000 USDC \(10000000000 raw\)$/m);
    expect(human.stdout).toMatch(/^ETH\s+1 ETH \(1000000000000000000 wei\)$/m);
    expect(human.stdout).not.toMatch(/usdc_balance|eth_balance/);
    const json = await cli(['--json', 'wallet']);
    expect(JSON.parse(json.stdout)).toMatchObject({ configured: true, usdc_balance: 10000 });
  });

  it('deposit --yes prints the tx hashes; positions shows the shares', async () => {
    const deposit = await cli(['deposit', 'moderate', '12.5', '--yes']);
    expect(deposit.code).toBe(0);
    expect(deposit.stdout).toMatch(/^approve tx {2}0x[0-9a-f]{64}$/m);
    expect(deposit.stdout).toMatch(/^deposit tx {2}0x[0-9a-f]{64}$/m);
    expect(deposit.stdout).toMatch(/^deposited 12\.5 USDC \(12500000 raw\) into /m);
    expect(deposit.stdout).toMatch(
      /^balance {5}[\d.]+ shares \(\d+ raw\), all the agent's shares in moderate$/m,
    );
    const positions = await cli(['positions']);
    expect(positions.stdout).toContain('moderate');
    expect(positions.stdout).toMatch(
      /│ moderate │ [\d.]+ +│ 12\.5 USDC │ 0x[0-9a-fA-F]{4}…[0-9a-fA-F]{4} │/,
    );
    const json = await cli(['--json', 'deposit', 'hedged', '1']);
    expect(json.code).toBe(0);
    const body = JSON.parse(json.stdout);
    expect(body).toMatchObject({ success: true, amount_usdc: 1, vault: 'Hedged USDC Vault' });
    const onchain = await cli(['--json', 'positions', '--wallet', body.agent_address]);
    expect(JSON.parse(onchain.stdout).positions).toHaveLength(2);
    // The same table for anyone's positions as for the agent's own.
    const own = await cli(['positions']);
    const anyone = await cli(['positions', '--wallet', body.agent_address]);
    const header = (text: string) => text.split('\n').find((line) => line.includes('vault'));
    expect(header(anyone.stdout)).toBe(header(own.stdout));
    expect(anyone.stdout).toContain('12.5');
  });

  it('deposit refuses an unknown vault and a bad amount with exit 2, naming the allowed values', async () => {
    const vault = await cli(['deposit', 'savings', '10', '--yes']);
    expect(vault.code).toBe(2);
    expect(vault.stderr).toContain(
      'conservative, moderate, aggressive, inverse, hedged, configurable',
    );
    const amount = await cli(['deposit', 'moderate', '1.1234567', '--yes']);
    expect(amount.code).toBe(2);
    expect(amount.stderr).toContain('at most 6 decimal places');
    const over = await cli(['--json', 'deposit', 'moderate', '50000', '--yes']);
    expect(over.code).toBe(2);
    expect(JSON.parse(over.stderr)).toMatchObject({ status: 400, code: 'bad_request' });
  });

  it('deposit takes any case of a vault id, .5 and 1e0, and suggests a near miss', async () => {
    const upper = await cli(['--json', 'deposit', 'CONSERVATIVE', '.5', '--yes']);
    expect(upper.code).toBe(0);
    expect(JSON.parse(upper.stdout)).toMatchObject({ amount_usdc: 0.5 });
    expect((await cli(['deposit', 'inverse', '1e0', '--yes'])).code).toBe(0);
    const near = await cli(['deposit', 'moderat', '1', '--yes']);
    expect(near.code).toBe(2);
    expect(near.stderr).toContain('did you mean moderate?');
    const negative = await cli(['deposit', 'moderate', '-1', '--yes']);
    expect(negative.code).toBe(2);
    const fresh = '0x00000000000000000000000000000000000f00d5';
    const fund = await cli(['--json', 'sandbox', 'fund', fresh, '--usdc', '1e3', '--eth', '.5']);
    expect(fund.code).toBe(0);
    expect(JSON.parse(fund.stdout)).toMatchObject({ eth_balance_wei: '500000000000000000' });
  });

  it('strategy submit, from flags and from --file, then strategy list', async () => {
    const submit = await cli([
      'strategy',
      'submit',
      '--name',
      'Mean reversion',
      '--description',
      'Buys dips, sells rips.',
      '--max-leverage',
      '300',
    ]);
    expect(submit.code).toBe(0);
    expect(submit.stdout).toMatch(
      /^submitted "Mean reversion" \(shadow\)\nstrategy +0x[0-9a-f]{64}$/m,
    );
    const file = join(dir, 'strategy.json');
    writeFileSync(
      file,
      JSON.stringify({
        name: 'From file',
        description: 'Read from a JSON file.',
        stop_loss_percent: 250,
      }),
    );
    const fromFile = await cli(['--json', 'strategy', 'submit', '--file', file]);
    expect(fromFile.code).toBe(0);
    expect(JSON.parse(fromFile.stdout).risk_params.stop_loss_percent).toBe(250);
    const list = await cli(['--json', 'strategy', 'list']);
    expect(JSON.parse(list.stdout).strategies.map((s: { name: string }) => s.name)).toEqual([
      'Mean reversion',
      'From file',
    ]);
    const human = await cli(['strategy', 'list']);
    expect(human.stdout).toContain('From file');
    // Times as ISO 8601 with a relative hint (under it, to fit 80 columns).
    expect(human.stdout).toMatch(
      /\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ │\n│.*│ \((now|\d+ (s|min|h|d) ago|in \d+ (s|min|h|d))\) +│/,
    );
    // The dry run shows each risk parameter with its unit.
    const dry = await cli([
      'strategy',
      'submit',
      '--name',
      'Units',
      '--description',
      'Shows units.',
      '--max-leverage',
      '300',
      '--dry-run',
    ]);
    expect(dry.stdout).toMatch(/^max_leverage\s+300 \(3x\)$/m);
  });

  it('strategy submit checks bounds and names missing flags before any request', async () => {
    const bounds = await cli([
      'strategy',
      'submit',
      '--name',
      'abc',
      '--description',
      'long enough',
      '--max-leverage',
      '5000',
    ]);
    expect(bounds.code).toBe(2);
    expect(bounds.stderr).toContain('--max-leverage 5000: must be 100 to 1000');
    const missing = await cli(['strategy', 'submit']);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain('missing --name');
    expect(missing.stderr).toContain('missing --description');
    // Every bad flag at once.
    const many = await cli([
      'strategy',
      'submit',
      '--name',
      'ok name',
      '--stop-loss',
      'x',
      '--slippage',
      '1.5',
    ]);
    expect(many.stderr).toContain('--stop-loss x: must be a whole number');
    expect(many.stderr).toContain('--slippage 1.5: must be a whole number');
    expect(many.stderr).toContain('missing --description');
    const dry = await cli([
      '--json',
      'strategy',
      'submit',
      '--name',
      'Dry',
      '--description',
      'Not sent at all.',
      '--dry-run',
    ]);
    expect(dry.code).toBe(0);
    expect(JSON.parse(dry.stdout)).toMatchObject({ name: 'Dry', max_leverage: 200 });
  });

  it('strategy submit --file refuses unknown fields, large files and bad paths, in plain words', async () => {
    const typo = join(dir, 'typo.json');
    writeFileSync(
      typo,
      JSON.stringify({ name: 'Typo', description: 'A misspelt field.', max_leverge: 900 }),
    );
    const refused = await cli(['strategy', 'submit', '--file', typo, '--dry-run']);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain('unknown field "max_leverge" (did you mean max_leverage?)');
    const huge = join(dir, 'huge.json');
    writeFileSync(huge, `{"name": "${'x'.repeat(200_000)}"}`);
    const tooBig = await cli(['strategy', 'submit', '--file', huge, '--dry-run']);
    expect(tooBig.code).toBe(2);
    expect(tooBig.stderr).toContain('a strategy is at most 64 KiB');
    const missing = await cli(['strategy', 'submit', '--file', join(dir, 'nope.json')]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain('no such file');
    expect(missing.stderr).not.toContain('ENOENT');
    const directory = await cli(['strategy', 'submit', '--file', dir]);
    expect(directory.code).toBe(2);
    expect(directory.stderr).toContain('is a directory');
    expect(directory.stderr).not.toContain('EISDIR');
    // --no-flash-loans overrides the file.
    const withLoans = join(dir, 'loans.json');
    writeFileSync(
      withLoans,
      JSON.stringify({ name: 'Loans', description: 'Flash loans on.', flash_loans_enabled: true }),
    );
    const off = await cli([
      '--json',
      'strategy',
      'submit',
      '--file',
      withLoans,
      '--no-flash-loans',
      '--dry-run',
    ]);
    expect(JSON.parse(off.stdout)).toMatchObject({ flash_loans_enabled: false });
  });

  it('vote: 403 below established (exit 4), then a vote, then a second is a conflict (exit 2)', async () => {
    const proposal = await cli(['--json', 'sandbox', 'proposal', 'CLI proposal']);
    const { proposal_id } = JSON.parse(proposal.stdout);
    const low = await cli(['vote', String(proposal_id), 'for']);
    expect(low.code).toBe(4);
    expect(low.stderr).toContain('`agentctl sandbox tier <wallet> established`');
    // The tier is checked locally, and either of the agent's wallets names it.
    const typo = await cli(['sandbox', 'tier', wallet, 'establshed']);
    expect(typo.code).toBe(2);
    expect(typo.stderr).toContain('did you mean established?');
    const agentWallet = JSON.parse((await cli(['--json', 'wallet'])).stdout).agent_address;
    expect((await cli(['sandbox', 'tier', agentWallet, 'Registered'])).code).toBe(0);
    expect((await cli(['sandbox', 'tier', wallet, 'established'])).code).toBe(0);
    const vote = await cli(['--json', 'vote', String(proposal_id), 'for', '--reason', 'yes']);
    expect(vote.code).toBe(0);
    expect(JSON.parse(vote.stdout)).toMatchObject({ success: true, support: 1, reason: 'yes' });
    const again = await cli(['vote', String(proposal_id), 'against']);
    expect(again.code).toBe(2);
    const bad = await cli(['vote', String(proposal_id), 'maybe']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('must be for, against or abstain');
  });

  it('faucet drips once, then exits 5 with the cooldown fields in the --json error', async () => {
    const drip = await cli(['faucet']);
    expect(drip.code).toBe(0);
    expect(drip.stdout).toMatch(
      /^received 0\.1 ETH \(100000000000000000 wei\) in the agent wallet\nwallet +0x[0-9a-fA-F]{40}\ntx +0x[0-9a-f]{64}$/m,
    );
    const again = await cli(['--json', 'faucet']);
    expect(again.code).toBe(5);
    expect(again.stdout).toBe('');
    expect(JSON.parse(again.stderr)).toMatchObject({
      success: false,
      status: 429,
      code: 'cooldown',
      next_eligible_timestamp: expect.any(Number),
      seconds_remaining: expect.any(Number),
    });
  });

  it('eligibility and nfts', async () => {
    const eligibility = await cli(['--json', 'eligibility']);
    expect(JSON.parse(eligibility.stdout).criteria.length).toBeGreaterThan(0);
    const nfts = await cli(['--json', 'nfts', '--wallet', wallet]);
    expect(JSON.parse(nfts.stdout)).toMatchObject({ total: 1 });
    const none = await cli(['nfts']);
    expect(none.code).toBe(2);
    expect(none.stderr).toContain('pass --wallet');
  });

  it('no key configured: exit 4 with a hint naming agentctl register', async () => {
    const result = await cli(['wallet'], { AGENTCTL_API_KEY: '' });
    expect(result.code).toBe(4);
    expect(result.stderr).toContain('agentctl register');
    const wrong = await cli(['wallet'], { AGENTCTL_API_KEY: 'agk_wrong' });
    expect(wrong.code).toBe(4);
  });

  it('sandbox commands need the admin token', async () => {
    const info = await cli(['--json', 'sandbox', 'info']);
    expect(JSON.parse(info.stdout)).toMatchObject({
      chain_id: 84532,
      role: 'writer',
      database: 'sqlite',
    });
    const noToken = await cli(['sandbox', 'info'], { AGENTCTL_ADMIN_TOKEN: '' });
    expect(noToken.code).toBe(4);
    const advance = await cli(['--json', 'sandbox', 'advance', '60']);
    expect(JSON.parse(advance.stdout).offset_seconds).toBeGreaterThanOrEqual(60);
    const backwards = await cli(['sandbox', 'advance', '-5']);
    expect(backwards.code).toBe(2);
    expect(backwards.stderr).toContain('the sandbox clock only moves forward');
    const fund = await cli(['--json', 'sandbox', 'fund', wallet, '--eth', '0.5']);
    expect(JSON.parse(fund.stdout).eth_balance_wei).toBe('500000000000000000');
  });

  it.each([
    [['stats'], /^total_agents\s+\d+$/m],
    [['leaderboard', '--limit', '3'], /CLI Agent/],
    [
      ['proposals'],
      /^vote_end +\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ \(in \d+ \w+\)$|^no open proposals$/m,
    ],
    [['eligibility'], /^eligible\s+(yes|no: not every criterion is met)$/m],
    [['keys', 'list'], /no keys|name/],
    [['sandbox', 'info'], /^role\s+writer\ndatabase\s+sqlite\nchain_id\s+84532$/m],
  ])('%j in human mode', async (args, expected) => {
    const result = await cli(args);
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(expected);
    expect(result.stdout).not.toMatch(/^\s*[{[]/);
  });

  it('lookup and nfts in human mode', async () => {
    const lookup = await cli(['lookup', wallet]);
    expect(lookup.stdout).toMatch(/^agent_name\s+CLI Agent$/m);
    const nfts = await cli(['nfts', '--wallet', wallet]);
    expect(nfts.stdout).toContain('Agent Pass');
  });
});
