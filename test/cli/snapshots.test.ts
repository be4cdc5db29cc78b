import {
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli, spawnCli } from '../helpers/cli.ts';
import {
  depositOver,
  registerOver,
  requestOver,
  type ServeProcess,
  startServe,
  until,
} from '../helpers/serve.ts';

/**
 * The snapshot verbs end to end: the built binary against a real `agentctl serve --state`
 * (real anvil), as a CI job would use them, and `agentctl watch` while a restore happens.
 * One serve for the file; each test leaves it holding only `genesis` and `base`.
 */
const ADMIN = 'snapshots-cli-admin';
let sandbox: ServeProcess;
let dir: string;
let alice: { apiKey: string };

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'agentctl-snapshots-cli-'));
  sandbox = await startServe([
    '--admin-token',
    ADMIN,
    '--log-level',
    'warn',
    '--rate-limit',
    'off',
    '--state',
    join(dir, 'state'),
  ]);
  alice = await registerOver(sandbox.url, 'Alice');
  await depositOver(sandbox.url, alice.apiKey, 10);
});
afterAll(async () => {
  sandbox.child.kill('SIGTERM');
  await sandbox.exited;
  await runCli(['serve', 'stop', '--state', join(dir, 'detached')], env());
  await runCli(['serve', 'stop'], { ...env(), ...ciHome() });
  rmSync(dir, { recursive: true, force: true });
});

const env = () => ({
  AGENTCTL_CONFIG_DIR: join(dir, 'config'),
  AGENTCTL_BASE_URL: sandbox.url,
  AGENTCTL_ADMIN_TOKEN: ADMIN,
});
const cli = (args: string[]) => runCli(args, env());
/** A CI runner's HOME, kept from job to job: the default state dir of `serve --detach`. */
const ciHome = () => ({ HOME: join(dir, 'runner-home'), XDG_STATE_HOME: '' });
/** Whether a process runs (Linux): a killed one nobody has reaped yet (a zombie) does not. */
const alive = (pid: number) => {
  try {
    return !/^\d+ \(.*\) Z/s.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
};
const ciStateDir = () => join(dir, 'runner-home', '.local', 'state', 'agentctl', 'sandbox');
const keyStatus = async (apiKey: string, url = sandbox.url) =>
  (await fetch(`${url}/api/v1/agent/wallet`, { headers: { 'x-api-key': apiKey } })).status;
const blockNumber = async () =>
  (await requestOver(sandbox.url, ADMIN, 'GET', '/sandbox/info')).body.index.block_number as number;

describe('agentctl sandbox snapshot, snapshots, restore, snapshot-delete', () => {
  it('takes, lists, restores and deletes, with the documented exit codes', async () => {
    const taken = await cli(['sandbox', 'snapshot', 'base']);
    expect(taken.stderr).toBe('');
    expect(taken.code).toBe(0);
    const block = Number(
      /^snapshot base taken at block (\d+) \([\d.]+ [KM]?B\)\n$/.exec(taken.stdout)?.[1],
    );
    expect(block).toBeGreaterThan(0);

    // A name in use: 409, exit 2; --replace takes it again.
    const again = await cli(['--json', 'sandbox', 'snapshot', 'base']);
    expect(again.code).toBe(2);
    expect(JSON.parse(again.stderr)).toMatchObject({ status: 409, code: 'conflict' });
    const replaced = await cli(['--json', 'sandbox', 'snapshot', 'base', '--replace']);
    expect(replaced.code).toBe(0);
    expect(JSON.parse(replaced.stdout)).toMatchObject({ name: 'base', block_number: block });

    // Bob registers after it, and the chain moves on.
    const bob = await registerOver(sandbox.url, 'Bob');
    await depositOver(sandbox.url, bob.apiKey, 5);
    expect(await blockNumber()).toBeGreaterThan(block);

    const listed = await cli(['--json', 'sandbox', 'snapshots']);
    expect(listed.code).toBe(0);
    const names = JSON.parse(listed.stdout).snapshots.map((s: { name: string }) => s.name);
    expect(names).toEqual(['genesis', 'base']);
    const table = await cli(['sandbox', 'snapshots']);
    expect(table.code).toBe(0);
    expect(table.stdout).toMatch(
      /│ base +│ \d+ +│ \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ \((now|\d+ s ago)\) +│ [\d.]+ [KM]B +│/,
    );
    expect(
      Math.max(...table.stdout.split('\n').map((line) => [...line].length)),
    ).toBeLessThanOrEqual(80);

    const restored = await cli(['sandbox', 'restore', 'base']);
    expect(restored.stderr).toBe('');
    expect(restored.code).toBe(0);
    expect(restored.stdout).toMatch(
      new RegExp(`^restored base: block ${block} \\(in \\d+ ms\\)\\n$`),
    );
    // Everything went back: Bob's key is unknown, Alice's works, the chain is at the snapshot.
    expect(await keyStatus(bob.apiKey)).toBe(401);
    expect(await keyStatus(alice.apiKey)).toBe(200);
    await until(async () => (await blockNumber()) === block);

    const unknown = await cli(['sandbox', 'restore', 'nope']);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toMatch(/^agentctl: 404: /);
    const badName = await cli(['sandbox', 'restore', '../etc']);
    expect(badName.code).toBe(2);
    expect(badName.stderr).toContain(
      'snapshot name "../etc": must be 1 to 64 of A-Z a-z 0-9 . _ -',
    );

    const genesis = await cli(['--json', 'sandbox', 'snapshot-delete', 'genesis']);
    expect(genesis.code).toBe(2);
    expect(JSON.parse(genesis.stderr)).toMatchObject({ status: 409, code: 'conflict' });
    const scratch = await cli(['sandbox', 'snapshot', 'scratch']);
    expect(scratch.code).toBe(0);
    const deleted = await cli(['sandbox', 'snapshot-delete', 'scratch']);
    expect(deleted).toMatchObject({ code: 0, stdout: 'deleted snapshot scratch\n' });
    const twice = await cli(['--json', 'sandbox', 'snapshot-delete', 'scratch']);
    expect(twice.code).toBe(2);
    expect(JSON.parse(twice.stderr)).toMatchObject({ status: 404, code: 'not_found' });
  }, 60_000);

  it('without the admin token: exit 4, before any request', async () => {
    const result = await runCli(['sandbox', 'snapshots'], {
      AGENTCTL_CONFIG_DIR: join(dir, 'config'),
      AGENTCTL_BASE_URL: sandbox.url,
    });
    expect(result.code).toBe(4);
    expect(result.stderr).toContain('no admin token');
  });
});

describe('agentctl sandbox export, and serve --from the file', () => {
  it('writes a 0600 file, refuses to overwrite it, and a detached serve starts from it', async () => {
    const file = join(dir, 'fixtures', 'base.sandbox');
    mkdirSync(join(dir, 'fixtures'));
    const exported = await cli(['sandbox', 'export', 'base', file]);
    expect(exported.code).toBe(0);
    expect(exported.stdout).toMatch(
      /^exported base to .*base\.sandbox \([\d.]+ [KM]?B, mode 0600\)\n$/,
    );
    expect(exported.stderr).toContain('wallet.mnemonic');
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(statSync(file).size).toBeGreaterThan(0);
    expect(readdirSync(join(dir, 'fixtures'))).toEqual(['base.sandbox']);

    const refused = await cli(['sandbox', 'export', 'base', file]);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain('exists: not overwriting it; pass --force');
    const forced = await cli(['--json', 'sandbox', 'export', 'base', file, '--force']);
    expect(forced.code).toBe(0);
    expect(JSON.parse(forced.stdout)).toMatchObject({
      name: 'base',
      file,
      size_bytes: statSync(file).size,
    });

    // The README's CI line: a ready sandbox in one command, Alice's key (hashed in the file)
    // working there.
    const state = join(dir, 'detached');
    const started = await runCli(
      ['serve', '--from', file, '--port', '0', '--state', state, '--detach'],
      env(),
    );
    expect(started.stderr).toBe('');
    expect(started.code).toBe(0);
    const url = /listening on (http:\/\/\S+)/.exec(started.stdout)?.[1] as string;
    expect(await keyStatus(alice.apiKey, url)).toBe(200);
    const there = await runCli(['--json', 'sandbox', 'snapshots'], {
      ...env(),
      AGENTCTL_BASE_URL: url,
    });
    expect(JSON.parse(there.stdout).snapshots.map((s: { name: string }) => s.name)).toContain(
      'base',
    );
    expect((await runCli(['serve', 'stop', '--state', state], env())).code).toBe(0);
  }, 60_000);

  it('serve --from FILE --detach, without --state, gives a new sandbox each time on one HOME, which serve stop finds and removes', async () => {
    const file = join(dir, 'ci.sandbox');
    expect((await cli(['sandbox', 'export', 'base', file])).code).toBe(0);
    const job = async () => {
      const started = await runCli(['serve', '--from', file, '--port', '0', '--detach'], {
        ...env(),
        ...ciHome(),
      });
      expect(started.stderr).toBe('');
      expect(started.code).toBe(0);
      expect(started.stdout).toContain(`state: ${ciStateDir()} (temporary, removed at exit)`);
      expect(started.stdout).toContain('stop (and remove) it with: agentctl serve stop\n');
      return {
        url: /listening on (http:\/\/\S+)/.exec(started.stdout)?.[1] as string,
        pid: /in the background as pid (\d+)/.exec(started.stdout)?.[1] as string,
      };
    };
    const stop = async (pid: string) => {
      const stopped = await runCli(['serve', 'stop'], { ...env(), ...ciHome() });
      expect(stopped.code).toBe(0);
      expect(stopped.stderr).toBe(`stopped the sandbox on ${ciStateDir()} (pid ${pid})\n`);
      // Removed, but for its log (and the lock file, which is never removed under a holder).
      expect(readdirSync(ciStateDir()).sort()).toEqual(['serve.lock', 'serve.log']);
    };

    const first = await job();
    expect(await keyStatus(alice.apiKey, first.url)).toBe(200);
    // The first job changes its sandbox; the second must not see it.
    const bob = await registerOver(first.url, 'Bob');
    expect(await keyStatus(bob.apiKey, first.url)).toBe(200);
    await stop(first.pid);

    const second = await job();
    expect(await keyStatus(alice.apiKey, second.url)).toBe(200);
    expect(await keyStatus(bob.apiKey, second.url)).toBe(401);
    await stop(second.pid);

    // A job killed with kill -9 leaves its sandbox, and its anvil, behind: the next job's
    // start stops that anvil and starts a new sandbox all the same.
    const killed = await job();
    const carol = await registerOver(killed.url, 'Carol');
    const anvilPid = Number(readFileSync(join(ciStateDir(), 'anvil.pid'), 'utf8').split(/\s+/)[0]);
    process.kill(Number(killed.pid), 'SIGKILL');
    await until(() => !alive(Number(killed.pid)));
    expect(alive(anvilPid)).toBe(true);
    const next = await job();
    // Killed (SIGKILL) before the new sandbox started; gone once the kernel has finished it.
    await until(() => !alive(anvilPid));
    expect(await keyStatus(alice.apiKey, next.url)).toBe(200);
    expect(await keyStatus(carol.apiKey, next.url)).toBe(401);
    await stop(next.pid);
  }, 60_000);

  it('serve --from FILE --detach refuses a default state dir that holds a kept sandbox, and --state naming a file', async () => {
    const file = join(dir, 'refused.sandbox');
    expect((await cli(['sandbox', 'export', 'base', file])).code).toBe(0);
    const home = { ...env(), ...ciHome(), HOME: join(dir, 'other-home') };
    const kept = join(dir, 'other-home', '.local', 'state', 'agentctl', 'sandbox');
    mkdirSync(kept, { recursive: true });
    writeFileSync(join(kept, 'agentctl-state.json'), '{"format":4,"sandbox_id":"kept"}\n');
    writeFileSync(join(kept, 'sandbox.db'), 'kept');
    const refused = await runCli(['serve', '--from', file, '--port', '0', '--detach'], home);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain(`--from: ${kept} holds a sandbox`);
    expect(readdirSync(kept)).toContain('sandbox.db');

    const plain = join(dir, 'plain-file');
    writeFileSync(plain, '');
    const notDir = await runCli(['serve', '--from', file, '--port', '0', '--state', plain], home);
    expect(notDir.code).toBe(1);
    expect(notDir.stderr).toBe(
      `agentctl: --from: ${plain} is not a directory; give --state a new or empty directory\n`,
    );
    const detached = await runCli(
      ['serve', '--from', file, '--port', '0', '--state', plain, '--detach'],
      home,
    );
    expect(detached.code).toBe(1);
    expect(detached.stderr).toBe(
      `agentctl: ${plain} is not a directory; give --state a directory\n`,
    );
  }, 30_000);
});

describe('agentctl watch while the sandbox is restored', () => {
  it('says so on stderr, emits the restored line with --json, and follows on at once', async () => {
    const subscriptions = async () =>
      (await requestOver(sandbox.url, ADMIN, 'GET', '/sandbox/info')).body.graphql
        .subscriptions as number;
    const watch = spawnCli(['--json', 'watch', 'transactions', '--count', '1'], {
      ...env(),
      AGENTCTL_API_KEY: alice.apiKey,
    });
    await until(async () => (await subscriptions()) === 1);
    const restored = await cli(['sandbox', 'restore', 'base']);
    expect(restored.code).toBe(0);
    await until(() => watch.stdout().includes('sandbox_restored'));
    // Subscribed again on the restored sandbox: the next transaction comes through.
    await until(() => watch.stderr().includes('subscribed again'));
    const { deposit_tx } = await depositOver(sandbox.url, alice.apiKey, 1);
    expect(await watch.exited).toBe(0);
    const lines = watch
      .stdout()
      .trimEnd()
      .split('\n')
      .map((line) => JSON.parse(line));
    expect(lines).toEqual([
      { event: 'sandbox_restored' },
      expect.objectContaining({ hash: deposit_tx, type: 'DEPOSIT' }),
    ]);
    expect(watch.stderr()).toContain('agentctl: the sandbox was restored to a snapshot');
    expect(watch.stderr()).not.toMatch(/lost; reconnecting/);
  }, 60_000);
});
