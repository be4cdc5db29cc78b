import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { pathOn } from '../../src/cli/commands/api/request.ts';
import { run as deposit } from '../../src/cli/commands/deposit.ts';
import { run as health } from '../../src/cli/commands/health.ts';
import { run as nfts } from '../../src/cli/commands/nfts.ts';
import { run as positions } from '../../src/cli/commands/positions.ts';
import { run as proposals } from '../../src/cli/commands/proposals.ts';
import { run as strategyList } from '../../src/cli/commands/strategy/list.ts';
import {
  type StrategySubmitOptions,
  run as strategySubmit,
} from '../../src/cli/commands/strategy/submit.ts';
import { run as vaults } from '../../src/cli/commands/vaults.ts';
import { run as vote } from '../../src/cli/commands/vote.ts';
import type { GlobalOptions } from '../../src/cli/context.ts';
import { describeFailure } from '../../src/cli/errors.ts';
import { transactionLine, vaultLine } from '../../src/cli/watch.ts';
import {
  type Canned,
  type CannedServer,
  cannedServer,
  capturedContext,
  type Recorded,
  sandboxTime,
} from '../helpers/run-context.ts';

/**
 * run() of the commands that carry logic, called with a context built from plain values and
 * collecting streams; HTTP goes to a real node:http server on 127.0.0.1 answering canned bodies.
 */

let configDir: string;
beforeAll(() => {
  configDir = mkdtempSync(join(tmpdir(), 'agentctl-ops-'));
});
afterAll(() => rmSync(configDir, { recursive: true, force: true }));

let server: CannedServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

/** A service on 127.0.0.1 (port 0) that answers every request with `answer`. */
async function serviceAnswering(answer: (request: Recorded) => Canned): Promise<string> {
  server = await cannedServer(answer);
  return server.url;
}

/** A JSON answer, stamped with a sandbox time when given (as every sandbox answer is). */
function json(status: number, body: unknown, at?: number): Canned {
  return { status, body, ...(at !== undefined && { headers: sandboxTime(at) }) };
}

/** A context for run(): its stdout and stderr collected as text. */
function testContext(globals: GlobalOptions = {}, baseUrl = 'http://127.0.0.1:9') {
  const { context, text } = capturedContext(
    { baseUrl, apiKey: 'agk_test', ...globals },
    { AGENTCTL_CONFIG_DIR: configDir },
  );
  return { context, collected: text };
}

/** The error run() threw, as the CLI would report it. */
async function failureOf(work: Promise<unknown>) {
  const error = await work.then(
    () => undefined,
    (thrown: unknown) => thrown,
  );
  expect(error).toBeDefined();
  return describeFailure(error);
}

describe('strategy submit reports every problem at once', () => {
  const submit = (options: StrategySubmitOptions) =>
    failureOf(strategySubmit({ dryRun: true, ...options }, testContext().context));

  it('names the missing description and the out-of-range values in one message', async () => {
    const failure = await submit({ name: 'ab', maxLeverage: '5' });
    expect(failure.exitCode).toBe(2);
    expect(failure.message).toContain('missing --description');
    expect(failure.message).toContain('--max-leverage 5: must be 100 to 1000');
    expect(failure.message).toContain('--name ab: must be 3 to 100 characters');
    expect(failure.message).not.toContain('\n');
  });

  it('a flag that is not a number hides none of the others', async () => {
    const failure = await submit({
      name: 'Mean reversion',
      description: 'Buys dips, sells rips.',
      slippage: 'abc',
      maxLeverage: '5',
      correlation: '200',
    });
    expect(failure.message).toBe(
      '--slippage abc: must be a whole number; --max-leverage 5: must be 100 to 1000; --correlation 200: must be 0 to 100',
    );
  });

  it("names a file's fields as the file does, and never repeats a long text back", async () => {
    const file = join(configDir, 'strategy.json');
    writeFileSync(file, JSON.stringify({ name: 'From a file', stop_loss_percent: 10 }));
    const failure = await submit({ file, description: 'x'.repeat(2001), maxLeverage: '300' });
    expect(failure.message).toBe(
      'stop_loss_percent (from --file): must be 50 to 5000; --description: must be 10 to 2000 characters',
    );
  });

  it('an unreadable file is reported with the flags, and does not count as missing fields', async () => {
    const failure = await submit({ file: join(configDir, 'none.json'), slippage: '0' });
    expect(failure.message).toBe(
      `--file ${join(configDir, 'none.json')}: no such file; --slippage 0: must be 1 to 1000`,
    );
  });

  it('a valid request passes the dry run', async () => {
    const { context, collected } = testContext({ json: true });
    await strategySubmit(
      { name: 'Mean reversion', description: 'Buys dips, sells rips.', dryRun: true },
      context,
    );
    expect(JSON.parse(collected.stdout)).toMatchObject({ max_leverage: 200 });
  });
});

describe('deposit', () => {
  it('says 0 and a negative amount are refused in the same words', async () => {
    const zero = await failureOf(
      deposit({ vault: 'moderate', amount: '0', yes: true }, testContext().context),
    );
    const negative = await failureOf(
      deposit({ vault: 'moderate', amount: '-5', yes: true }, testContext().context),
    );
    expect(zero.message).toBe('amount 0: must be greater than 0');
    expect(negative.message).toBe('amount -5: must be greater than 0');
    expect([zero.exitCode, negative.exitCode]).toEqual([2, 2]);
  });

  it("calls the shares the agent's balance in the vault, with their unit", async () => {
    const url = await serviceAnswering(() =>
      json(200, {
        success: true,
        agent_address: `0x${'11'.repeat(20)}`,
        vault: 'moderate',
        vault_address: `0x${'22'.repeat(20)}`,
        amount_usdc: 100,
        approve_tx: `0x${'aa'.repeat(32)}`,
        deposit_tx: `0x${'bb'.repeat(32)}`,
        status: 'confirmed',
        shares_balance: '200000000',
      }),
    );
    const { context, collected } = testContext({}, url);
    await deposit({ vault: 'moderate', amount: '100', yes: true }, context);
    expect(collected.stdout).toMatch(
      /^balance {5}200 shares \(200000000 raw\), all the agent's shares in moderate$/m,
    );
    expect(collected.stdout).not.toMatch(/^shares /m);
  });
});

describe('times are ISO 8601 with a hint from the service clock', () => {
  it('proposals shows the voting window, not Unix seconds', async () => {
    const sandboxNow = 1_900_000_000;
    const url = await serviceAnswering(() =>
      json(
        200,
        {
          proposals: [
            {
              proposal_id: 3,
              title: 'Raise the APY',
              description: 'From 4 % to 5 %.',
              proposer: `0x${'33'.repeat(20)}`,
              status: 'active',
              vote_start: sandboxNow - 60,
              vote_end: sandboxNow + 7 * 86_400,
              votes: { for: 1, against: 0, abstain: 2 },
            },
          ],
          total: 1,
        },
        sandboxNow,
      ),
    );
    const { context, collected } = testContext({}, url);
    await proposals({}, context);
    expect(collected.stdout).toMatch(/^vote_start +2030-03-17T17:45:40Z \(1 min ago\)$/m);
    expect(collected.stdout).toMatch(/^vote_end +2030-03-24T17:46:40Z \(in 7 d\)$/m);
    expect(collected.stdout).toMatch(/^votes +for 1, against 0, abstain 2$/m);
    expect(collected.stdout).not.toContain(String(sandboxNow + 7 * 86_400));
  });

  it('strategy list counts from the sandbox clock, not the wall clock', async () => {
    // A sandbox a day ahead of the wall clock, and a strategy submitted a second ago there.
    const sandboxNow = Math.floor(Date.now() / 1000) + 86_400;
    const url = await serviceAnswering(() =>
      json(
        200,
        {
          agent_address: `0x${'11'.repeat(20)}`,
          strategies: [
            {
              strategy_id: `0x${'44'.repeat(32)}`,
              name: 'Mean reversion',
              description: 'Buys dips, sells rips.',
              status: 'submitted',
              created_at: sandboxNow - 1,
              last_status_change: sandboxNow - 1,
              strategy_contract: `0x${'55'.repeat(20)}`,
            },
          ],
          total_count: 1,
        },
        sandboxNow,
      ),
    );
    const { context, collected } = testContext({}, url);
    await strategyList({}, context);
    expect(collected.stdout).toMatch(/\(\d+ s ago\)/);
    expect(collected.stdout).not.toMatch(/\(in /);
  });
});

describe('vaults', () => {
  const address = (digit: string) => `0x${digit.repeat(40)}`;
  const body = {
    vaults: ['conservative', 'moderate', 'aggressive', 'configurable'].map((id, i) => ({
      vault_id: id,
      address: address(String(i + 1)),
      name: `${id[0]?.toUpperCase()}${id.slice(1)} USDC Vault`,
      asset: 'USDC',
      total_assets: '123456789.123456',
      apy: 10.25,
      status: 'active',
    })),
    total: 4,
  };

  it('fits 80 columns, addresses shortened; --wide gives the names, raw amounts and full addresses', async () => {
    const url = await serviceAnswering(() => json(200, body));
    const narrow = testContext({}, url);
    await vaults({}, narrow.context);
    const lines = narrow.collected.stdout.trimEnd().split('\n');
    expect(Math.max(...lines.map((line) => line.length))).toBeLessThanOrEqual(80);
    expect(narrow.collected.stdout).toContain('0x1111…1111');
    expect(narrow.collected.stdout).toContain('123456789.123456 USDC');
    expect(narrow.collected.stdout).toContain('configurable');

    const wide = testContext({}, url);
    await vaults({ wide: true }, wide.context);
    expect(wide.collected.stdout).toContain(address('1'));
    expect(wide.collected.stdout).toContain('Moderate USDC Vault');
    expect(wide.collected.stdout).toContain('123456789.123456 USDC (123456789123456 raw)');

    const raw = testContext({ json: true }, url);
    await vaults({}, raw.context);
    expect(JSON.parse(raw.collected.stdout)).toEqual(body);
  });
});

describe('an error body that is not JSON', () => {
  const PAGE = `<!DOCTYPE html>
<html>
  <head><title>404 Not Found</title></head>
  <body>
    <h1>Not Found</h1>
    <p>The requested URL was not found on this server.</p>
    <hr>
    <address>Apache Server at 127.0.0.1</address>
  </body>
</html>
`;

  it('is one line with the status and a hint, never the page', async () => {
    const url = await serviceAnswering(() => ({
      status: 404,
      headers: { 'content-type': 'text/html' },
      text: PAGE,
    }));
    const failure = await failureOf(vaults({}, testContext({}, url).context));
    expect(failure.exitCode).toBe(2);
    expect(failure.message).not.toContain('\n');
    expect(failure.message).not.toContain('<');
    expect(failure.message).toMatch(/^404: the answer is not JSON \(it begins "404 Not Found/);
    expect(failure.message).toContain('is this an agentctl service? check --base-url');
    expect(failure.message.length).toBeLessThan(200);
  });
});

describe('an error body that is a bare JSON string', () => {
  it('is the message', async () => {
    const url = await serviceAnswering(() => json(500, 'the index is being rebuilt'));
    const failure = await failureOf(vaults({}, testContext({}, url).context));
    expect(failure.message).toBe('500: the index is being rebuilt');
  });
});

describe('watch lines', () => {
  it("stamp a vault event with its block's time", () => {
    expect(
      vaultLine(
        {
          address: `0x${'11'.repeat(20)}`,
          name: 'Moderate USDC Vault',
          tvl: '5000000',
          tvlUsd: 5,
          totalShares: '5000000',
          pricePerShare: '1000000',
          apy: { current: 8 },
          updatedAt: '2031-01-02T03:04:05Z',
        },
        true,
      ),
    ).toBe(
      '2031-01-02T03:04:05Z  Moderate USDC Vault  tvl 5 USDC (5000000 raw)  price 1.000000  apy 8 %',
    );
    expect(
      transactionLine(
        {
          hash: `0x${'aa'.repeat(32)}`,
          type: 'DEPOSIT',
          status: 'FULFILLED',
          amount: '2000000',
          shares: '2000000',
          user: `0x${'11'.repeat(20)}`,
          timestamp: '2031-01-02T03:04:05Z',
          vault: { address: `0x${'22'.repeat(20)}`, name: 'Moderate USDC Vault' },
        },
        true,
      ),
    ).toMatch(/^2031-01-02T03:04:05Z {2}deposit {2}fulfilled {2}2 USDC \(2000000 raw\)/);
  });
});

describe('checks before any request', () => {
  it('vote refuses a bad support or proposal id with exit 2', async () => {
    const support = await failureOf(
      vote({ proposalId: '3', support: 'maybe' }, testContext().context),
    );
    expect(support).toMatchObject({
      exitCode: 2,
      message: 'support maybe: must be for, against or abstain',
    });
    const id = await failureOf(vote({ proposalId: 'x', support: 'for' }, testContext().context));
    expect(id).toMatchObject({ exitCode: 2, message: 'proposal id x: must be an integer' });
  });

  it('nfts without --wallet or a registered wallet says how to give one', async () => {
    const failure = await failureOf(nfts({}, testContext().context));
    expect(failure.exitCode).toBe(2);
    expect(failure.message).toMatch(/^no wallet: pass --wallet, or register/);
  });

  it('api refuses a URL on another host, so the key never goes there', () => {
    expect(pathOn('http://127.0.0.1:8787', 'http://127.0.0.1:8787/health?x=1')).toBe('/health?x=1');
    expect(pathOn('http://127.0.0.1:8787', 'api/v1/vaults')).toBe('/api/v1/vaults');
    expect(() => pathOn('http://127.0.0.1:8787', 'http://evil.example/health')).toThrow(
      /is not on the service/,
    );
  });
});

describe('reads', () => {
  it("positions --wallet shows a known shape as the agent's own table, any other field by field", async () => {
    let body: unknown = {
      positions: [
        {
          vault_id: 'moderate',
          vault_address: `0x${'22'.repeat(20)}`,
          vault_name: 'Moderate USDC Vault',
          shares: '12.5',
          value_usdc: '12.5',
        },
      ],
    };
    const url = await serviceAnswering(() => json(200, body));
    const known = testContext({}, url);
    await positions({ wallet: `0x${'11'.repeat(20)}` }, known.context);
    expect(known.collected.stdout).toMatch(/│ moderate │ 12\.5 +│ 12\.5 USDC │ 0x2222…2222 │/);
    body = { holdings: 'none yet', total: 0 };
    const other = testContext({}, url);
    await positions({ wallet: `0x${'11'.repeat(20)}` }, other.context);
    expect(other.collected.stdout).toMatch(/^holdings +none yet$/m);
  });

  it('health exits 1 after printing an answer that is not healthy', async () => {
    const url = await serviceAnswering(() =>
      json(200, {
        status: 'degraded',
        version: '0.1.0',
        chain_id: 84532,
        chain_name: 'Base Sepolia',
        rpc_connected: true,
        reason: 'the index is being rebuilt',
      }),
    );
    const { context, collected } = testContext({}, url);
    const failure = await failureOf(health({}, context));
    expect(failure).toMatchObject({
      exitCode: 1,
      message: 'the service is degraded (the index is being rebuilt)',
    });
    expect(collected.stdout).toMatch(/^status +degraded$/m);
  });
});
