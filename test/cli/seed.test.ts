import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { mnemonicToAccount } from 'viem/accounts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../helpers/cli.ts';
import { requestOver, type ServeProcess, startServe } from '../helpers/serve.ts';

/**
 * `agentctl sandbox seed`, the built binary against a real serve: the committed example runs,
 * and what it says it created is read back through the API; the same file gives the same
 * addresses on a fresh sandbox; a bad file is refused whole before anything is sent; a
 * failing step stops the run, named, with its own exit code.
 */
const ADMIN_TOKEN = 'seed-test-admin-token';
const EXAMPLE = fileURLToPath(new URL('../../examples/seed.json', import.meta.url));
const example = JSON.parse(readFileSync(EXAMPLE, 'utf8')) as { seed_phrase: string };

/** `${step.field}`, as a seed file writes a reference. */
const ref = (name: string) => `\${${name}}`;

type Results = Record<string, Record<string, string | number>>;

let serve: ServeProcess;
let dir: string;
let seeded: Results;

const seed = (url: string, args: string[], env: NodeJS.ProcessEnv = {}) =>
  runCli(['--base-url', url, 'sandbox', 'seed', ...args], {
    AGENTCTL_ADMIN_TOKEN: ADMIN_TOKEN,
    AGENTCTL_CONFIG_DIR: dir,
    ...env,
  });
const admin = (method: string, path: string, body?: object) =>
  requestOver(serve.url, ADMIN_TOKEN, method, path, body);
const asAgent = (apiKey: string, method: string, path: string) =>
  requestOver(serve.url, '', method, path, undefined, apiKey);
const writeSeed = (name: string, file: object) => {
  const path = join(dir, name);
  writeFileSync(path, JSON.stringify(file));
  return path;
};
const registered = async (address: string) =>
  (await requestOver(serve.url, '', 'GET', `/api/v1/agent/auth/lookup?wallet=${address}`)).body
    .registered as boolean;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'agentctl-seed-'));
  serve = await startServe(['--admin-token', ADMIN_TOKEN, '--log-level', 'warn']);
  const out = join(dir, 'seeded.json');
  const run = await seed(serve.url, [EXAMPLE, '--out', out]);
  expect(run.stderr).toContain('a_day_later: the clock is 86400 s ahead');
  expect(run.code).toBe(0);
  seeded = JSON.parse(readFileSync(out, 'utf8')) as Results;
});

afterAll(async () => {
  serve?.child.kill('SIGTERM');
  await serve?.exited;
  rmSync(dir, { recursive: true, force: true });
});

describe('sandbox seed runs the example', () => {
  it('writes the map to --out with mode 0600, and keeps the keys off stdout', async () => {
    const out = join(dir, 'seeded.json');
    expect(statSync(out).mode & 0o777).toBe(0o600);
    expect(Object.keys(seeded)).toEqual([
      'alice',
      'bob',
      'bob_funds',
      'alice_moderate',
      'alice_request',
      's1',
      's2',
      'pause_s2',
      'p1',
      'alice_votes',
      'node1',
      'a_day_later',
    ]);
  });

  it('derives the agents from the seed phrase: key_index, else their place among them', () => {
    expect(seeded.alice?.address).toBe(
      mnemonicToAccount(example.seed_phrase, { addressIndex: 0 }).address,
    );
    expect(seeded.bob?.address).toBe(
      mnemonicToAccount(example.seed_phrase, { addressIndex: 7 }).address,
    );
  });

  it('registered agents whose keys work, with their fields and tiers', async () => {
    const alice = seeded.alice as Record<string, string>;
    const wallet = await asAgent(alice.api_key as string, 'GET', '/api/v1/agent/wallet');
    expect(wallet.status).toBe(200);
    expect(wallet.body.agent_address).toBe(alice.agent_address);
    const lookup = await requestOver(
      serve.url,
      '',
      'GET',
      `/api/v1/agent/auth/lookup?wallet=${alice.address}`,
    );
    expect(lookup.body).toMatchObject({
      registered: true,
      agent_name: 'Alice Trend Bot',
      tier: 'established',
    });
    const bob = await requestOver(
      serve.url,
      '',
      'GET',
      `/api/v1/agent/auth/lookup?wallet=${seeded.bob?.address}`,
    );
    expect(bob.body).toMatchObject({ registered: true, agent_name: 'Bob Governance' });
    expect(bob.body.tier).not.toBe('established');
  });

  it("funded bob's agent wallet on top of what it got at registration", async () => {
    const wallet = await asAgent(seeded.bob?.api_key as string, 'GET', '/api/v1/agent/wallet');
    // 10,000 USDC and 1 ETH at registration, 50,000.5 USDC and 2 ETH from the fund step.
    expect(wallet.body).toMatchObject({
      agent_address: seeded.bob?.agent_address,
      usdc_balance_raw: '60000500000',
    });
    expect(BigInt(wallet.body.eth_balance_wei)).toBeGreaterThan(2n * 10n ** 18n);
    expect(seeded.bob_funds).toMatchObject({ usdc_balance_raw: '60000500000' });
  });

  it('deposited, into an ERC-4626 vault and as an ERC-7540 request', async () => {
    const alice = seeded.alice as Record<string, string>;
    const positions = await asAgent(
      alice.api_key as string,
      'GET',
      '/api/v1/agent/vault/positions',
    );
    expect(positions.body.positions).toContainEqual(
      expect.objectContaining({ vault_id: 'moderate', shares: '250' }),
    );
    expect(seeded.alice_moderate).toMatchObject({
      status: 'confirmed',
      shares_balance: '250000000',
    });
    expect(seeded.alice_request).toMatchObject({ status: 'pending', request_id: '1' });
    const requests = await requestOver(
      serve.url,
      '',
      'GET',
      `/v1/users/${alice.agent_address}/transactions?type=deposit_request`,
    );
    expect(requests.body.transactions).toEqual([
      expect.objectContaining({ hash: seeded.alice_request?.deposit_tx, amount: '100000000' }),
    ]);
  });

  it('submitted strategies and moved them to their lifecycle states', async () => {
    const aliceList = await asAgent(
      seeded.alice?.api_key as string,
      'GET',
      '/api/v1/agent/strategy/list',
    );
    expect(aliceList.body.strategies).toEqual([
      expect.objectContaining({ strategy_id: seeded.s1?.strategy_id, status: 'paper_trading' }),
    ]);
    const bobList = await asAgent(
      seeded.bob?.api_key as string,
      'GET',
      '/api/v1/agent/strategy/list',
    );
    // Walked to live, then paused by the strategy_status step.
    expect(bobList.body.strategies).toEqual([
      expect.objectContaining({ strategy_id: seeded.s2?.strategy_id, status: 'paused' }),
    ]);
    expect(seeded.pause_s2).toMatchObject({ previous_status: 'live', status: 'paused' });
  });

  it('opened the proposal, with its references resolved, and cast the vote', async () => {
    const proposals = await requestOver(serve.url, '', 'GET', '/api/v1/proposals');
    const proposal = proposals.body.proposals.find(
      (each: { proposal_id: number }) => each.proposal_id === seeded.p1?.proposal_id,
    );
    expect(proposal).toMatchObject({
      description: "Proposed by Alice Trend Bot's operator.",
      votes: { for: 1, against: 0, abstain: 0 },
    });
  });

  it('registered a node whose key the data API takes, and advanced the clock', async () => {
    const withNode = await asAgent(seeded.node1?.node_key as string, 'GET', '/v1/protocol/stats');
    expect(withNode.status).toBe(200);
    const forged = await asAgent(`agn_${'0'.repeat(64)}`, 'GET', '/v1/protocol/stats');
    expect(forged.status).toBe(401);
    const info = await admin('GET', '/sandbox/info');
    expect(info.body.clock.offset_seconds).toBe(86_400);
    expect(seeded.a_day_later).toMatchObject({ offset_seconds: 86_400 });
  });

  it('gives the same addresses when run again on a fresh sandbox', async () => {
    const fresh = await startServe(['--admin-token', ADMIN_TOKEN, '--log-level', 'warn']);
    try {
      const run = await seed(fresh.url, [EXAMPLE, '--json']);
      expect(run.code).toBe(0);
      const again = JSON.parse(run.stdout) as Results;
      expect(again.alice?.address).toBe(seeded.alice?.address);
      expect(again.bob?.address).toBe(seeded.bob?.address);
      // New keys: a new sandbox issued them.
      expect(again.alice?.api_key).not.toBe(seeded.alice?.api_key);
    } finally {
      fresh.child.kill('SIGTERM');
      await fresh.exited;
    }
  });
});

describe('sandbox seed refuses', () => {
  it('a bad file with every problem at once, named by step and field, sending nothing', async () => {
    const valid = { name: 'carol', agent: { agent_name: 'Carol', key_index: 30 } };
    const file = writeSeed('bad.json', {
      version: 1,
      seed_phrase: example.seed_phrase,
      steps: [
        valid,
        {
          name: 'd',
          deposit: { api_key: ref('carol.apikey'), vault_id: 'moderat', amount_usdc: 5 },
        },
        { name: 'v', vote: { api_key: ref('dave.api_key'), proposal_id: 1, support: 'yes' } },
        { name: 'd', depost: {} },
      ],
    });
    const run = await seed(serve.url, [file]);
    expect(run.code).toBe(2);
    expect(run.stdout).toBe('');
    const lines = run.stderr.trim().split('\n');
    expect(lines[0]).toBe(`agentctl: ${file}: 6 problems; nothing was sent`);
    // In the file's order: by step, then by field as the step gives them.
    expect(lines.slice(1)).toEqual([
      `  step d (steps[1]) deposit.api_key: ${ref('carol.apikey')}: step carol (agent) gives address, agent_address, agent_id, agent_name, api_key, tier (did you mean api_key?)`,
      '  step d (steps[1]) deposit.vault_id: must be one of conservative, moderate, aggressive, inverse, hedged, configurable',
      `  step v (steps[2]) vote.api_key: ${ref('dave.api_key')}: no earlier step is named dave`,
      '  step v (steps[2]) vote.support: must be for, against or abstain',
      '  step d (steps[3]) name: d is the name of an earlier step; names must be unique',
      '  step d (steps[3]) depost: unknown step kind (did you mean deposit?); kinds: agent, fund, deposit, strategy, strategy_status, proposal, vote, node, advance',
    ]);
    const carol = mnemonicToAccount(example.seed_phrase, { addressIndex: 30 });
    expect(await registered(carol.address)).toBe(false);
  });

  it('to register the same agents twice: the file is for a fresh sandbox', async () => {
    const run = await seed(serve.url, [EXAMPLE]);
    expect(run.code).toBe(2);
    expect(run.stdout).toBe('');
    expect(run.stderr).toContain(
      `step alice (agent) failed: 409: wallet ${seeded.alice?.address} is already registered; a seed file registers its agents anew: run it against a fresh sandbox`,
    );
  });

  it('a run whose admin steps have no admin token, before anything is sent', async () => {
    const file = writeSeed('no-token.json', {
      version: 1,
      seed_phrase: example.seed_phrase,
      steps: [
        { name: 'erin', agent: { agent_name: 'Erin', key_index: 31 } },
        { name: 'later', advance: { seconds: 60 } },
      ],
    });
    const run = await seed(serve.url, [file], { AGENTCTL_ADMIN_TOKEN: '' });
    expect(run.stderr).toContain('no admin token');
    expect(run.code).toBe(4);
    const erin = mnemonicToAccount(example.seed_phrase, { addressIndex: 31 });
    expect(await registered(erin.address)).toBe(false);
  });

  it('to go on past a failing step: named, its exit code, nothing after it run', async () => {
    const before = (await admin('GET', '/sandbox/info')).body.clock.offset_seconds;
    const file = writeSeed('failing.json', {
      version: 1,
      seed_phrase: example.seed_phrase,
      steps: [
        { name: 'frank', agent: { agent_name: 'Frank', key_index: 32 } },
        { name: 'p', proposal: { title: 'Frank may not vote on this' } },
        // Frank is not established: the service answers 403.
        {
          name: 'frank_votes',
          vote: {
            api_key: ref('frank.api_key'),
            proposal_id: ref('p.proposal_id'),
            support: 'for',
          },
        },
        { name: 'later', advance: { seconds: 3600 } },
      ],
    });
    const run = await seed(serve.url, [file, '--json']);
    expect(run.code).toBe(4);
    const error = JSON.parse(run.stderr.trim().split('\n').at(-1) as string);
    expect(error).toMatchObject({ step: 'frank_votes', status: 403, code: 'forbidden' });
    expect(error.error).toMatch(/^step frank_votes \(vote\) failed: .*tier established/);
    // The steps that ran are handed over: Frank's API key is not shown again.
    const partial = JSON.parse(run.stdout) as Results;
    expect(Object.keys(partial)).toEqual(['frank', 'p']);
    const wallet = await asAgent(partial.frank?.api_key as string, 'GET', '/api/v1/agent/wallet');
    expect(wallet.status).toBe(200);
    expect((await admin('GET', '/sandbox/info')).body.clock.offset_seconds).toBe(before);
  });

  it('to lose what a step created before it failed: the registered agent, incomplete', async () => {
    const file = writeSeed('tier-refused.json', {
      version: 1,
      seed_phrase: example.seed_phrase,
      steps: [
        { name: 'george', agent: { agent_name: 'George', key_index: 33, tier: 'established' } },
      ],
    });
    // The registration needs no admin token; the tier change after it is refused (401).
    const run = await seed(serve.url, [file, '--json'], { AGENTCTL_ADMIN_TOKEN: 'wrong-token' });
    expect(run.code).toBe(4);
    const george = mnemonicToAccount(example.seed_phrase, { addressIndex: 33 });
    const partial = JSON.parse(run.stdout) as Results;
    expect(Object.keys(partial)).toEqual(['george']);
    expect(partial.george).toMatchObject({ address: george.address, complete: false });
    expect(partial.george?.tier).not.toBe('established');
    const error = JSON.parse(run.stderr.trim().split('\n').at(-1) as string);
    expect(error).toMatchObject({ step: 'george', status: 401 });
    expect(error.error).toMatch(/^step george \(agent\) failed: /);
    expect(error.error).toContain(
      `before it failed, it registered ${george.address} (tier ${partial.george?.tier}): in the map as george, with "complete": false`,
    );
    // The key issued once is handed over, and works.
    const wallet = await asAgent(partial.george?.api_key as string, 'GET', '/api/v1/agent/wallet');
    expect(wallet.status).toBe(200);
    expect(wallet.body.agent_address).toBe(partial.george?.agent_address);
  });

  it('to lose a submitted strategy whose status move failed: in --out, incomplete', async () => {
    const file = writeSeed('move-refused.json', {
      version: 1,
      seed_phrase: example.seed_phrase,
      steps: [
        { name: 'henry', agent: { agent_name: 'Henry', key_index: 34 } },
        {
          name: 'h1',
          strategy: {
            api_key: ref('henry.api_key'),
            name: 'Momentum',
            description: 'Follows the trend.',
            status: 'paper_trading',
          },
        },
      ],
    });
    const out = join(dir, 'move-refused-out.json');
    const run = await seed(serve.url, [file, '--out', out, '--json'], {
      AGENTCTL_ADMIN_TOKEN: 'wrong-token',
    });
    expect(run.code).toBe(4);
    expect(JSON.parse(run.stdout)).toEqual({ out, steps: ['henry', 'h1'], complete: false });
    const partial = JSON.parse(readFileSync(out, 'utf8')) as Results;
    expect(partial.henry?.complete).toBeUndefined();
    expect(partial.h1).toMatchObject({ complete: false });
    const list = await asAgent(
      partial.henry?.api_key as string,
      'GET',
      '/api/v1/agent/strategy/list',
    );
    expect(list.body.strategies).toEqual([
      expect.objectContaining({ strategy_id: partial.h1?.strategy_id, status: partial.h1?.status }),
    ]);
    expect(partial.h1?.status).not.toBe('paper_trading');
    const error = JSON.parse(run.stderr.trim().split('\n').at(-1) as string);
    expect(error.error).toContain(
      `before it failed, it submitted ${partial.h1?.strategy_id}, now ${partial.h1?.status}: in the map as h1`,
    );
  });
});
