import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { run as advance } from '../../../src/cli/commands/sandbox/advance.ts';
import { run as fund } from '../../../src/cli/commands/sandbox/fund.ts';
import { run as info } from '../../../src/cli/commands/sandbox/info.ts';
import { run as node } from '../../../src/cli/commands/sandbox/node.ts';
import { run as proposal } from '../../../src/cli/commands/sandbox/proposal.ts';
import { run as strategyStatus } from '../../../src/cli/commands/sandbox/strategy-status.ts';
import type { GlobalOptions } from '../../../src/cli/context.ts';
import { CliError, EXIT } from '../../../src/cli/exit-codes.ts';
import {
  capturedContext,
  type Recorded,
  sandboxTime,
  useCannedServer,
} from '../../helpers/run-context.ts';

/**
 * The `sandbox` verbs' run() against a plain HTTP server answering the admin API's canned
 * bodies, stamped with the sandbox's clock (X-Sandbox-Time) as serve stamps them.
 */
const SANDBOX_NOW = 1_796_000_000; // 2026-11-30T00:53:20Z, not the wall clock
const ADDRESS = '0x1111111111111111111111111111111111111111';
const ANSWERS: Record<string, unknown> = {
  '/sandbox/fund': {
    address: ADDRESS,
    usdc_tx: `0x${'a'.repeat(64)}`,
    eth_tx: null,
    usdc_balance_raw: '10000000000',
    eth_balance_wei: '1500000000000000000',
  },
  '/sandbox/proposals': {
    proposal_id: 3,
    tx_hash: `0x${'b'.repeat(64)}`,
    vote_end: SANDBOX_NOW + 7 * 86_400,
  },
  '/sandbox/clock/advance': { now: SANDBOX_NOW, offset_seconds: 86_400 },
  '/sandbox/nodes': { node_id: 'node-1', node_key: 'agn_secretkey' },
  '/sandbox/info': {
    version: '0.1.0',
    role: 'writer',
    database: 'sqlite',
    chain_id: 84532,
    rpc_url: 'http://127.0.0.1:8545',
    contracts: {
      usdc: ADDRESS,
      protocol_token: ADDRESS,
      strategy_registry: ADDRESS,
      governor: ADDRESS,
      agent_pass: ADDRESS,
      agent_onboarding: ADDRESS,
      vaults: Object.fromEntries(
        ['conservative', 'moderate', 'aggressive', 'inverse', 'hedged', 'configurable'].map(
          (id) => [id, ADDRESS],
        ),
      ),
      deployed_block: 3,
    },
    clock: { now: SANDBOX_NOW, offset_seconds: 0 },
    state_dir: '/tmp/state',
    persistent: false,
    rate_limit: true,
    index: {
      block_number: 15,
      writes_indexed: 0,
      write_wait_ms_p50: null,
      write_wait_ms_p99: null,
    },
    standby: { status: 'none', block_number: null },
    graphql: {
      sockets: 0,
      subscriptions: 0,
      distinct_subscriptions: 0,
      events_sent: 0,
      dropped: 0,
    },
  },
};

const server = useCannedServer(
  ({ url }) =>
    url.pathname in ANSWERS
      ? { body: ANSWERS[url.pathname] }
      : { status: 404, body: { error: 'not found' } },
  sandboxTime(SANDBOX_NOW),
);
let requests: Recorded[];
beforeAll(() => {
  requests = server.requests;
});
const configDir = mkdtempSync(join(tmpdir(), 'agentctl-sandbox-run-'));
afterAll(() => rmSync(configDir, { recursive: true, force: true }));

/** A context for run(), writing to strings; `json` is the global --json. */
function context(globals: GlobalOptions = {}) {
  const { context: made, text } = capturedContext(
    { baseUrl: server.url, ...globals },
    { AGENTCTL_CONFIG_DIR: configDir },
  );
  return { context: made, stdout: () => text.stdout, stderr: () => text.stderr };
}

describe('sandbox fund', () => {
  it('shows the balances with their units beside the raw values', async () => {
    const { context: ctx, stdout } = context();
    await fund({ adminToken: 'tok', address: ADDRESS, usdc: '10000', eth: '1.5' }, ctx);
    expect(stdout()).toMatch(/^usdc_balance\s+10000 USDC \(10000000000 raw\)$/m);
    expect(stdout()).toMatch(/^eth_balance\s+1\.5 ETH \(1500000000000000000 wei\)$/m);
    // The transaction that did not happen is left out rather than shown empty.
    expect(stdout()).not.toContain('eth_tx');
    expect(JSON.parse(requests.at(-1)?.body ?? '')).toEqual({
      address: ADDRESS,
      usdc: 10000,
      eth: 1.5,
    });
    expect(requests.at(-1)?.headers['x-admin-token']).toBe('tok');
  });

  it('prints the body as received with --json', async () => {
    const { context: ctx, stdout } = context({ json: true });
    await fund({ adminToken: 'tok', address: ADDRESS, usdc: '1', eth: undefined }, ctx);
    expect(JSON.parse(stdout())).toEqual(ANSWERS['/sandbox/fund']);
  });
});

describe('times by the sandbox clock', () => {
  it('sandbox proposal: the vote end as ISO 8601 with a hint from the sandbox time', async () => {
    const { context: ctx, stdout } = context();
    await proposal({ adminToken: 'tok', title: 'Raise it', description: undefined }, ctx);
    expect(stdout()).toMatch(/^vote_end\s+2026-12-07T00:53:20Z \(in 7 d\)$/m);
    expect(stdout()).not.toContain(String(SANDBOX_NOW + 7 * 86_400));
  });

  it('sandbox advance: the new now as ISO 8601', async () => {
    const { context: ctx, stdout } = context();
    await advance({ adminToken: 'tok', seconds: '86400' }, ctx);
    expect(stdout()).toMatch(/^now\s+2026-11-30T00:53:20Z \((now|\d+ s ago)\)$/m);
    expect(stdout()).not.toContain(String(SANDBOX_NOW));
  });

  it('sandbox advance refuses a clock going back or standing still, before any request', async () => {
    for (const seconds of ['0', '-5', '1.5']) {
      const before = requests.length;
      const { context: ctx } = context();
      await expect(advance({ adminToken: 'tok', seconds }, ctx)).rejects.toMatchObject({
        exitCode: EXIT.usage,
      });
      expect(requests.length).toBe(before);
    }
  });
});

describe('sandbox advance, on what is not a number', () => {
  it('asks for a whole number of seconds, not a clock going forward', async () => {
    for (const seconds of ['abc', '1.5', '1e3', '']) {
      const { context: ctx } = context();
      const refused = advance({ adminToken: 'tok', seconds }, ctx);
      await expect(refused).rejects.toMatchObject({ exitCode: EXIT.usage });
      await expect(refused).rejects.toThrow('must be a whole number of seconds');
      await expect(refused).rejects.not.toThrow('only moves forward');
    }
  });

  it('keeps saying the clock only moves forward for 0 and a negative number', async () => {
    for (const seconds of ['0', '-5', '-0']) {
      const { context: ctx } = context();
      await expect(advance({ adminToken: 'tok', seconds }, ctx)).rejects.toThrow(
        'the sandbox clock only moves forward',
      );
    }
  });
});

describe('sandbox info', () => {
  it('shows nested objects as indented fields, one per line', async () => {
    const { context: ctx, stdout } = context();
    await info({ adminToken: 'tok' }, ctx);
    const lines = stdout().split('\n');
    expect(lines).toContain('contracts');
    expect(lines).toContain('  vaults');
    expect(lines.some((line) => /^ {4}configurable\s+0x1111/.test(line))).toBe(true);
    expect(
      lines.some((line) => /^ {2}now\s+2026-11-30T00:53:20Z \((now|\d+ s ago)\)$/.test(line)),
    ).toBe(true);
    expect(lines.some((line) => /^ {2}write_wait_ms_p50\s+none$/.test(line))).toBe(true);
    expect(lines.some((line) => /^role\s+writer$/.test(line))).toBe(true);
    expect(lines.some((line) => /^database\s+sqlite$/.test(line))).toBe(true);
    // No line holds a whole object.
    expect(stdout()).not.toContain('=');
    expect(Math.max(...lines.map((line) => line.length))).toBeLessThan(80);
  });

  it('prints the body with --json, the role and the database included', async () => {
    const { context: ctx, stdout } = context({ json: true });
    await info({ adminToken: 'tok' }, ctx);
    expect(JSON.parse(stdout())).toMatchObject({ role: 'writer', database: 'sqlite' });
  });

  it('without a token, says where to get one (exit 4) and sends nothing', async () => {
    const before = requests.length;
    const { context: ctx } = context();
    await expect(info({ adminToken: undefined }, ctx)).rejects.toMatchObject({
      exitCode: EXIT.auth,
      message: expect.stringContaining('agentctl serve prints it at start'),
    });
    expect(requests.length).toBe(before);
  });
});

describe('sandbox node', () => {
  it('prints the key once, and says on stderr that it is shown only this once', async () => {
    const { context: ctx, stdout, stderr } = context();
    await node({ adminToken: 'tok', name: 'Research', operator: ADDRESS }, ctx);
    expect(stdout().split('agn_secretkey')).toHaveLength(2);
    expect(stderr()).toContain('shown only this once');
    expect(stderr()).not.toContain('agn_secretkey');
  });

  it('says it with --json too, keeping stdout to the body', async () => {
    const { context: ctx, stdout, stderr } = context({ json: true });
    await node({ adminToken: 'tok', name: 'Research', operator: ADDRESS }, ctx);
    expect(JSON.parse(stdout())).toEqual(ANSWERS['/sandbox/nodes']);
    expect(stderr()).toContain('shown only this once');
  });
});

describe('sandbox strategy-status', () => {
  const id = `0x${'c'.repeat(64)}`;

  it('refuses the data API\'s "evolution", naming the statuses it stands for', async () => {
    const { context: ctx } = context();
    const refusal = await strategyStatus(
      { adminToken: 'tok', strategyId: id, status: 'evolution' },
      ctx,
    ).catch((error: unknown) => error);
    expect(refusal).toBeInstanceOf(CliError);
    expect(refusal).toMatchObject({ exitCode: EXIT.usage });
    const { message } = refusal as CliError;
    expect(message).toContain('guardian_review, paper_trading, pending_oracle_approval');
    expect(message).toContain('paper_trading');
  });

  it('suggests the status meant for a typo', async () => {
    const { context: ctx } = context();
    await expect(
      strategyStatus({ adminToken: 'tok', strategyId: id, status: 'paper_tradng' }, ctx),
    ).rejects.toThrow('did you mean paper_trading?');
  });
});
