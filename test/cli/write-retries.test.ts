import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../helpers/cli.ts';
import { type CutProxy, cutProxy } from '../helpers/cut-proxy.ts';
import { registerOver, type ServeProcess, startServe } from '../helpers/serve.ts';

/**
 * The command line's keyed writes against a real serve, through a TCP proxy that loses an
 * answer once the deposit was done: retried with the same key where the service has shown it
 * honours keys, never where it has not (exit 7 with the key, finished by running it again).
 */

const UUID_V4 = /[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}/;
const ADMIN_TOKEN = 'write-retries';
let sandbox: ServeProcess;
let apiKey: string;
const dirs: string[] = [];
const proxies: CutProxy[] = [];

beforeAll(async () => {
  sandbox = await startServe(['--admin-token', ADMIN_TOKEN, '--log-level', 'warn']);
  apiKey = (await registerOver(sandbox.url, 'Retrying Agent')).apiKey;
});
afterAll(async () => {
  for (const proxy of proxies) await proxy.close();
  sandbox.child.kill('SIGTERM');
  await sandbox.exited;
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

/** A command line with a configuration of its own (what it has learned of services). */
function commandLine() {
  const dir = mkdtempSync(join(tmpdir(), 'agentctl-retries-'));
  dirs.push(dir);
  return {
    dir,
    run: (baseUrl: string, args: string[]) =>
      runCli(args, {
        AGENTCTL_CONFIG_DIR: dir,
        AGENTCTL_BASE_URL: baseUrl,
        AGENTCTL_API_KEY: apiKey,
        AGENTCTL_ADMIN_TOKEN: ADMIN_TOKEN,
      }),
  };
}

async function proxy(options: Parameters<typeof cutProxy>[1] = {}) {
  const started = await cutProxy(sandbox.url, options);
  proxies.push(started);
  return started;
}

/** The agent wallet's USDC, read straight from serve: what the deposits really took. */
async function usdcBalance(): Promise<number> {
  const answer = await fetch(`${sandbox.url}/api/v1/agent/wallet`, {
    headers: { 'x-api-key': apiKey },
  });
  return ((await answer.json()) as { usdc_balance: number }).usdc_balance;
}

const deposits = (seen: CutProxy) =>
  seen.requests.filter(({ line }) => line.startsWith('POST /api/v1/agent/vault/deposit '));

describe('a deposit whose answer is lost', () => {
  it('is sent again with the same key where the service honours keys, and done once', async () => {
    const through = await proxy();
    const cli = commandLine();
    // The first keyed answer shows the service honours keys: remembered by origin.
    expect((await cli.run(through.url, ['deposit', 'moderate', '1', '--yes'])).code).toBe(0);
    const config = JSON.parse(readFileSync(join(cli.dir, 'config.json'), 'utf8'));
    expect(config.idempotency_key_services).toEqual([through.url]);

    const before = await usdcBalance();
    through.cut(1);
    const retried = await cli.run(through.url, ['deposit', 'moderate', '7', '--yes']);
    expect(retried.stderr).toMatch(
      /^agentctl: retrying POST \/api\/v1\/agent\/vault\/deposit with the same Idempotency-Key in \d+ ms \(the connection was closed after it was sent\): try 2 of 4$/m,
    );
    expect(retried.code).toBe(0);
    expect(retried.stdout).toMatch(/^deposited 7 USDC \(7000000 raw\) into moderate$/m);
    // Two tries with one key: the first was done and its answer lost, the second replayed.
    const [, first, second] = deposits(through);
    expect(first?.key).toMatch(UUID_V4);
    expect(second?.key).toBe(first?.key);
    expect(through.answers.slice(1)).toEqual([
      { status: 200, replayed: 'false', cut: true },
      { status: 200, replayed: 'true', cut: false },
    ]);
    expect(await usdcBalance()).toBe(before - 7);
  });

  it('is tried once where the service has not shown it honours keys: exit 7, the key, and how to finish', async () => {
    // The service's answers without Idempotent-Replayed: as one that ignores the key.
    const through = await proxy({ stripReplayed: true });
    const cli = commandLine();
    expect((await cli.run(through.url, ['deposit', 'moderate', '1', '--yes'])).code).toBe(0);
    const before = await usdcBalance();
    through.cut(1);
    const key = 'ci-run-81/step deposit:1';
    const lost = await cli.run(through.url, [
      '--idempotency-key',
      key,
      'deposit',
      'moderate',
      '3',
      '--yes',
    ]);
    expect(lost.code).toBe(7);
    // Exactly one try reached the service, carrying the key as given.
    expect(deposits(through).slice(1)).toEqual([
      { line: 'POST /api/v1/agent/vault/deposit HTTP/1.1', key },
    ]);
    expect(lost.stderr).not.toMatch(/retrying/);
    expect(lost.stderr).toContain(
      'agentctl: POST /api/v1/agent/vault/deposit: the outcome is unknown (the connection was closed after it was sent; 1 try: this service has not shown that it honours Idempotency-Key, so it was not sent again); it may or may not have taken effect\n' +
        `idempotency key: ${key}\n` +
        `finish it: look it up with \`agentctl data transactions\`; or run the same command again with --idempotency-key ${key}`,
    );
    expect(lost.stderr).not.toContain(apiKey);
    expect(await usdcBalance()).toBe(before - 3);

    // Finished as it says, straight to serve: the stored answer, nothing done again.
    const finished = await cli.run(sandbox.url, [
      'deposit',
      'moderate',
      '3',
      '--yes',
      '--idempotency-key',
      key,
    ]);
    expect(finished.code).toBe(0);
    expect(finished.stdout).toMatch(/^deposited 3 USDC \(3000000 raw\) into moderate$/m);
    expect(await usdcBalance()).toBe(before - 3);
  });
});

describe('a registration whose answer is lost', () => {
  /** What serve says of agents: how many there are, and the wallet's registration. */
  const totalAgents = async () =>
    ((await (await fetch(`${sandbox.url}/api/v1/agents/stats`)).json()) as { total_agents: number })
      .total_agents;
  const lookUp = async (wallet: string) =>
    (await (await fetch(`${sandbox.url}/api/v1/agent/auth/lookup?wallet=${wallet}`)).json()) as {
      registered: boolean;
      agent_name?: string;
      api_key_prefix?: string;
    };

  it('is finished by the printed rerun with its key: the same signed request, answered with the API key', async () => {
    // A connection for each request: the registration's is not one kept alive after the nonce,
    // which the client would take for stale and send again at once.
    const through = await proxy({ closeEach: true });
    const dir = mkdtempSync(join(tmpdir(), 'agentctl-register-'));
    dirs.push(dir);
    const signer = generatePrivateKey();
    const wallet = privateKeyToAccount(signer).address;
    const run = (url: string, args: string[], privateKey = signer) =>
      runCli(args, {
        AGENTCTL_CONFIG_DIR: dir,
        AGENTCTL_BASE_URL: url,
        AGENTCTL_PRIVATE_KEY: privateKey,
      });
    const key = 'ci-run-9/register';
    const command = ['register', '--name', 'Lost Answer', '--yes', '--idempotency-key', key];
    const agentsBefore = await totalAgents();
    /** The handshake's requests since `from` (the health check and wallet read aside). */
    const registrations = (from: number) =>
      through.requests.slice(from).filter(({ line }) => line.includes(' /api/v1/agent/auth/'));
    /** The last answer to a keyed write (only those carry Idempotent-Replayed). */
    const lastKeyedAnswer = () =>
      through.answers.filter(({ replayed }) => replayed !== undefined).at(-1);

    // The service is not known to honour keys here: one try, its answer cut after the commit.
    through.cut(1, '/api/v1/agent/auth/register');
    const lost = await run(through.url, command);
    expect(lost.code).toBe(7);
    expect(lost.stderr).toContain(
      `idempotency key: ${key}\n` +
        `finish it: run the same command again with --idempotency-key ${key}: it sends the same signed registration again, which a service that honours the key answers with what it did, the API key included`,
    );
    expect(registrations(0)).toEqual([
      { line: `GET /api/v1/agent/auth/lookup?wallet=${wallet} HTTP/1.1`, key: undefined },
      { line: `GET /api/v1/agent/auth/nonce?wallet=${wallet} HTTP/1.1`, key: undefined },
      { line: 'POST /api/v1/agent/auth/register HTTP/1.1', key },
    ]);
    expect(through.answers.filter(({ cut }) => cut)).toEqual([
      { status: 200, replayed: 'false', cut: true },
    ]);
    expect((await lookUp(wallet)).registered).toBe(true);
    // The signed request is kept, its owner's alone, under a name that is not the key.
    const keptDir = join(dir, 'pending-registrations');
    expect(statSync(keptDir).mode & 0o777).toBe(0o700);
    const [keptName, ...others] = readdirSync(keptDir);
    expect(others).toEqual([]);
    expect(keptName).toMatch(/^[0-9a-f]{64}\.json$/);
    expect(statSync(join(keptDir, keptName as string)).mode & 0o777).toBe(0o600);
    const { signature } = JSON.parse(readFileSync(join(keptDir, keptName as string), 'utf8'))
      .body as { signature: string };

    // What was kept for this wallet is not another's: a second wallet with the same key (into
    // another profile) signs a request of its own.
    const second = generatePrivateKey();
    const secondWallet = privateKeyToAccount(second).address;
    const sentBefore = through.requests.length;
    const other = await run(
      through.url,
      ['--profile', 'second', 'register', '--name', 'Same Key', '--yes', '--idempotency-key', key],
      second,
    );
    expect(other.code).toBe(0);
    expect(other.stderr).not.toMatch(/sending the registration/);
    expect(registrations(sentBefore)).toEqual([
      { line: `GET /api/v1/agent/auth/lookup?wallet=${secondWallet} HTTP/1.1`, key: undefined },
      { line: `GET /api/v1/agent/auth/nonce?wallet=${secondWallet} HTTP/1.1`, key: undefined },
      { line: 'POST /api/v1/agent/auth/register HTTP/1.1', key },
    ]);
    expect(lastKeyedAnswer()).toEqual({ status: 200, replayed: 'false', cut: false });
    expect(readdirSync(keptDir)).toEqual([keptName]);

    // The rerun may not change what is sent again: another name is refused, nothing sent.
    const sentBeforeRefusal = through.requests.length;
    const renamed = await run(through.url, [
      ...command.slice(0, 2),
      'Renamed',
      ...command.slice(3),
    ]);
    expect(renamed.code).toBe(2);
    expect(renamed.stderr).toContain(
      `the registration of ${wallet} kept for this --idempotency-key has another --name`,
    );
    expect(registrations(sentBeforeRefusal)).toEqual([]);

    // The printed rerun: the kept request sent again (no new nonce), its stored answer replayed.
    const sentBeforeRerun = through.requests.length;
    const finished = await run(through.url, command);
    expect(finished.code).toBe(0);
    expect(finished.stderr).toMatch(
      new RegExp(
        `^agentctl: sending the registration of ${wallet} kept for this Idempotency-Key since \\d{4}-\\d\\d-\\d\\d \\d\\d:\\d\\d:\\d\\d UTC again, not signing a new one$`,
        'm',
      ),
    );
    expect(registrations(sentBeforeRerun)).toEqual([
      { line: 'POST /api/v1/agent/auth/register HTTP/1.1', key },
    ]);
    expect(lastKeyedAnswer()).toEqual({ status: 200, replayed: 'true', cut: false });
    expect(finished.stdout).toMatch(
      new RegExp(
        `^registered Lost Answer \\(${wallet}\\) as agent [0-9a-f-]{36}, tier unverified$`,
        'm',
      ),
    );
    for (const text of [lost, other, renamed, finished].flatMap((r) => [r.stdout, r.stderr])) {
      expect(text).not.toContain(signature);
    }
    // Its outcome known, nothing is kept; the API key is in the profile, as a register puts it.
    expect(readdirSync(keptDir)).toEqual([]);
    const profile = JSON.parse(readFileSync(join(dir, 'config.json'), 'utf8')).profiles.default;
    expect(profile).toMatchObject({ wallet_address: wallet, base_url: through.url });
    expect(profile.api_key.startsWith((await lookUp(wallet)).api_key_prefix)).toBe(true);
    const whoami = await run(through.url, ['whoami']);
    expect(whoami.code).toBe(0);
    expect(whoami.stdout).toContain('Lost Answer');
    // One agent for each wallet: the lost one and the second.
    expect(await totalAgents()).toBe(agentsBefore + 2);
  });
});

describe('sandbox seed', () => {
  it('keys its writes KEY:1, KEY:2, … in order: run again with the key, each is answered as it was', async () => {
    const through = await proxy();
    const cli = commandLine();
    const file = join(cli.dir, 'seed.json');
    const wallet = '0x00000000000000000000000000000000000000a1';
    writeFileSync(
      file,
      JSON.stringify({
        version: 1,
        steps: [
          { name: 'funds', fund: { address: wallet, usdc: 5 } },
          { name: 'later', advance: { seconds: 60 } },
        ],
      }),
    );
    const first = await cli.run(through.url, [
      'sandbox',
      'seed',
      file,
      '--idempotency-key',
      'seed-7',
    ]);
    expect(first.code).toBe(0);
    const again = await cli.run(through.url, [
      'sandbox',
      'seed',
      file,
      '--idempotency-key',
      'seed-7',
    ]);
    expect(again.code).toBe(0);
    expect(through.requests.map(({ line, key }) => `${line.split(' ')[1]} ${key}`)).toEqual([
      '/sandbox/fund seed-7:1',
      '/sandbox/clock/advance seed-7:2',
      '/sandbox/fund seed-7:1',
      '/sandbox/clock/advance seed-7:2',
    ]);
    expect(through.answers.map(({ replayed }) => replayed)).toEqual([
      'false',
      'false',
      'true',
      'true',
    ]);
    // The same map: the same balance and the same clock, nothing done twice.
    expect(again.stdout).toBe(first.stdout);
  });
  it('registers an agent whose answer was lost once: the run made again with its key sends the kept request', async () => {
    const through = await proxy({ closeEach: true });
    const cli = commandLine();
    const file = join(cli.dir, 'agents.json');
    const privateKey = generatePrivateKey();
    const wallet = privateKeyToAccount(privateKey).address;
    writeFileSync(
      file,
      JSON.stringify({
        version: 1,
        steps: [{ name: 'carol', agent: { agent_name: 'Carol Lost', private_key: privateKey } }],
      }),
    );
    const seed = ['sandbox', 'seed', file, '--idempotency-key', 'seed-agents'];
    through.cut(1, '/api/v1/agent/auth/register');
    const lost = await cli.run(through.url, seed);
    expect(lost.code).toBe(7);
    expect(lost.stderr).toContain(
      'finish it: run the same command again with --idempotency-key seed-agents: it sends the same signed registration again',
    );
    const again = await cli.run(through.url, seed);
    expect(again.code).toBe(0);
    expect(again.stderr).toContain(`agentctl: sending the registration of ${wallet} kept for`);
    const registrations = through.requests.filter(({ line }) => line.includes('/auth/'));
    // One nonce and one signature: the second run sent the first's request under its key.
    expect(
      registrations.map(({ line, key }) => `${line.split(/[ ?]/, 2).join(' ')} ${key}`),
    ).toEqual([
      'GET /api/v1/agent/auth/nonce undefined',
      'POST /api/v1/agent/auth/register seed-agents:1',
      'POST /api/v1/agent/auth/register seed-agents:1',
    ]);
    expect(through.answers.filter(({ replayed }) => replayed !== undefined)).toEqual([
      { status: 200, replayed: 'false', cut: true },
      { status: 200, replayed: 'true', cut: false },
    ]);
    // The map holds the agent's API key: it works.
    const { carol } = JSON.parse(again.stdout) as { carol: { api_key: string } };
    const whoami = await fetch(`${sandbox.url}/api/v1/agent/wallet`, {
      headers: { 'x-api-key': carol.api_key },
    });
    expect(whoami.status).toBe(200);
  });
});

describe('sandbox seed, its service killed between a commit and its answer', () => {
  it('says the outcome is unknown with its key (not unreachable), though the retry is refused', async () => {
    // Kept-alive connections: the advance goes on the fund's, and the service is gone at its
    // answer, so the client's resend for a stale connection, and its retries, are refused.
    const through = await proxy({ stopOnCut: true });
    const cli = commandLine();
    const file = join(cli.dir, 'killed.json');
    writeFileSync(
      file,
      JSON.stringify({
        version: 1,
        steps: [
          {
            name: 'funds',
            fund: { address: '0x00000000000000000000000000000000000000b2', usdc: 1 },
          },
          { name: 'later', advance: { seconds: 3600 } },
        ],
      }),
    );
    const clock = async () =>
      (
        (await (
          await fetch(`${sandbox.url}/sandbox/info`, { headers: { 'x-admin-token': ADMIN_TOKEN } })
        ).json()) as { clock: { offset_seconds: number } }
      ).clock.offset_seconds;
    const before = await clock();
    through.cut(1, '/sandbox/clock/advance');
    const seed = ['sandbox', 'seed', file, '--idempotency-key', 'seed-killed'];
    const killed = await cli.run(through.url, seed);
    expect(killed.stderr).toContain('idempotency key: seed-killed\n');
    expect(killed.code).toBe(7);
    expect(await clock()).toBe(before + 3600);

    // Finished as it says, straight to serve: each write answered as it was, none done again.
    const finished = await cli.run(sandbox.url, seed);
    expect(finished.code).toBe(0);
    expect(await clock()).toBe(before + 3600);
  });
});

describe('sandbox seed, finished as it says', () => {
  it("is run again with the printed key after a deposit's answer was lost: its agent's registration is answered as it was", async () => {
    // Every try's answer lost: exit 7 after the last.
    const through = await proxy({ closeEach: true });
    const cli = commandLine();
    const file = join(cli.dir, 'agent-deposit.json');
    writeFileSync(
      file,
      JSON.stringify({
        version: 1,
        steps: [
          { name: 'dan', agent: { agent_name: 'Dan Lost', private_key: generatePrivateKey() } },
          { name: 'dan_usdc', fund: { address: `\${dan.agent_address}`, usdc: 10 } },
          {
            name: 'dan_deposit',
            deposit: { api_key: `\${dan.api_key}`, vault_id: 'moderate', amount_usdc: 4 },
          },
        ],
      }),
    );
    const seed = ['sandbox', 'seed', file, '--idempotency-key', 'seed-finish'];
    through.cut(4, '/api/v1/agent/vault/deposit');
    const lost = await cli.run(through.url, seed);
    expect(lost.code).toBe(7);
    expect(lost.stderr).toContain('run the same command again with --idempotency-key seed-finish');

    const again = await cli.run(through.url, seed);
    expect(again.code).toBe(0);
    expect(again.stderr).toContain('agentctl: sending the registration of');
    // Register, fund, a deposit and its three retries (all four answers lost); then each
    // write of the run made again replayed.
    expect(
      through.answers
        .filter(({ replayed }) => replayed !== undefined)
        .map(({ replayed }) => replayed),
    ).toEqual(['false', 'false', 'false', 'true', 'true', 'true', 'true', 'true', 'true']);
    // Deposited once: a new agent's 10 000 USDC, 10 funded, 4 deposited.
    const { dan } = JSON.parse(again.stdout) as { dan: { api_key: string } };
    const wallet = await fetch(`${sandbox.url}/api/v1/agent/wallet`, {
      headers: { 'x-api-key': dan.api_key },
    });
    expect(((await wallet.json()) as { usdc_balance: number }).usdc_balance).toBe(10_006);
    // The run done, nothing is kept.
    expect(readdirSync(join(cli.dir, 'pending-registrations'))).toEqual([]);
  });
});

describe('a service that ignores the key', () => {
  it('gets one try of a write it fails (5xx): exit 7, and --json carries the key', async () => {
    let received = 0;
    const keys: unknown[] = [];
    const server = createServer((request, response) => {
      received += 1;
      keys.push(request.headers['idempotency-key']);
      request.resume();
      response.writeHead(502, { 'content-type': 'application/json' });
      response.end('{"error":"upstream failed"}');
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      const failed = await commandLine().run(url, ['--json', 'faucet']);
      expect(failed.code).toBe(7);
      expect(received).toBe(1);
      expect(keys[0]).toMatch(UUID_V4);
      expect(failed.stdout).toBe('');
      expect(JSON.parse(failed.stderr)).toEqual({
        error: expect.stringMatching(
          /^POST \/api\/v1\/agent\/faucet: the outcome is unknown \(HTTP 502; the service said: upstream failed; 1 try: .*; finish it: /,
        ),
        status: 502,
        code: 'outcome_unknown',
        idempotency_key: keys[0],
      });
    } finally {
      server.close();
    }
  });
});

describe('agentctl api --idempotency-key', () => {
  it('sends the key with a write as given and once, even when its answer is lost; the same key again gets the kept answer', async () => {
    const through = await proxy({ closeEach: true });
    const cli = commandLine();
    const key = 'ci-81 raw faucet';
    const faucet = ['api', 'POST', '/api/v1/agent/faucet', '--idempotency-key', key];
    through.cut(1, '/api/v1/agent/faucet');
    const lost = await cli.run(through.url, faucet);
    expect(lost.code).toBe(6);
    expect(lost.stderr).not.toMatch(/retrying/);
    const replayed = await cli.run(through.url, faucet);
    expect(replayed.code).toBe(0);
    expect(JSON.parse(replayed.stdout)).toMatchObject({ success: true });
    expect(await cli.run(through.url, faucet)).toEqual(replayed);
    expect(through.requests).toEqual(
      Array(3).fill({ line: 'POST /api/v1/agent/faucet HTTP/1.1', key }),
    );
    expect(through.answers).toEqual([
      { status: 200, replayed: 'false', cut: true },
      { status: 200, replayed: 'true', cut: false },
      { status: 200, replayed: 'true', cut: false },
    ]);

    const read = await cli.run(through.url, [
      'api',
      'GET',
      '/api/v1/agent/wallet',
      '--idempotency-key',
      key,
    ]);
    expect(read.code).toBe(2);
    expect(read.stderr).toContain('agentctl: --idempotency-key: a GET is not a write');
    expect(through.requests).toHaveLength(3);
  });
});

describe('--idempotency-key', () => {
  it('is refused before anything is sent unless 1 to 255 printable ASCII characters (exit 2)', async () => {
    const through = await proxy();
    const cli = commandLine();
    for (const [key, why] of [
      ['', 'must not be empty'],
      ['k'.repeat(256), 'must be at most 255 characters (it has 256)'],
      ['café', 'must be printable ASCII characters only'],
      ['ci-81 ', 'must not begin or end with a space'],
    ] as const) {
      const refused = await cli.run(through.url, [
        'deposit',
        'moderate',
        '1',
        '--yes',
        '--idempotency-key',
        key,
      ]);
      expect(refused.code).toBe(2);
      expect(refused.stderr).toContain(`agentctl: --idempotency-key ${key}: ${why}`);
    }
    expect(through.requests).toEqual([]);
  });
});
