import { spawn, spawnSync } from 'node:child_process';
import {
  chmodSync,
  chownSync,
  closeSync,
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  readSync,
  rmSync,
  statSync,
  truncateSync,
  writeFileSync,
  writeSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { SandboxInfo } from '../../src/api/schemas/index.ts';
import { anvilsStartedFor, startAnvil } from '../../src/sandbox/chain/anvil.ts';
import { BIN, registerOver, requestOver, startServe } from '../helpers/serve.ts';

/**
 * Every refusal of `serve --state DIR` at start: exit code 1, one line that names the file at
 * fault and says what to do, no stack trace, and no anvil left running.
 */
const TOKEN = 'startup-test-admin';
const isRoot = process.getuid?.() === 0;
const works = (command: string, args: string[]) =>
  spawnSync(command, args, { stdio: 'ignore' }).status === 0;
/** Root can drop the capabilities that let it ignore file ownership, and be an ordinary user. */
const AS_ORDINARY_USER = ['setpriv', '--bounding-set', '-dac_override,-dac_read_search,-fowner'];
const canActAsOrdinaryUser = isRoot && works('setpriv', [...AS_ORDINARY_USER, 'true']);
const canBindReadOnly = isRoot && works('unshare', ['--mount', '--propagation', 'private', 'true']);
/** Someone else: the uid nobody has, on most systems. */
const OTHER_UID = 65534;

let dir: string;
const states: string[] = [];
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'agentctl-serve-startup-'));
});
afterEach(() => {
  for (const state of states.splice(0)) {
    const left = anvilsStartedFor(state);
    for (const pid of left) process.kill(pid, 'SIGKILL');
    expect(left, `anvil left running for ${state}`).toEqual([]);
  }
  chmodSync(dir, 0o700);
  rmSync(dir, { recursive: true, force: true });
});

interface Outcome {
  /**
   * The exit code, or the signal that ended it, or 'started' when serve got as far as
   * listening (it is then stopped).
   */
  code: number | NodeJS.Signals | null | 'started';
  stderr: string;
}

/**
 * Runs `agentctl serve ARGS` (behind `prefix`, a command that runs the rest) expecting a
 * refusal. A serve that starts anyway is stopped, and so is one that hangs.
 */
function refusal(
  args: string[],
  prefix: string[] = [],
  env: NodeJS.ProcessEnv = {},
): Promise<Outcome> {
  const command = [...prefix, process.execPath, BIN, 'serve', '--port', '0', ...args];
  const child = spawn(command[0] as string, command.slice(1), {
    env: { ...process.env, AGENTCTL_ADMIN_TOKEN: undefined, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  let started = false;
  child.stdout.on('data', (chunk) => {
    out += chunk;
    if (!started && out.includes('listening on')) {
      started = true;
      child.kill('SIGTERM');
    }
  });
  child.stderr.on('data', (chunk) => {
    err += chunk;
  });
  const hung = setTimeout(() => child.kill('SIGKILL'), 20_000);
  return new Promise((resolve) =>
    child.on('exit', (code, signal) => {
      clearTimeout(hung);
      resolve({ code: started ? 'started' : (code ?? signal), stderr: err });
    }),
  );
}

/** Exit code 1 and one line on stderr, with every fragment in it and no stack trace. */
function expectRefused(outcome: Outcome, ...fragments: string[]): void {
  expect(outcome.code, outcome.stderr).toBe(1);
  expect(outcome.stderr).not.toMatch(/\n\s+at /);
  expect(outcome.stderr.trim().split('\n')).toHaveLength(1);
  for (const fragment of fragments) expect(outcome.stderr).toContain(fragment);
}

/** A state dir with one registered agent and a chain checkpoint, from a serve since stopped. */
async function madeState(name = 'state'): Promise<string> {
  const state = join(dir, name);
  states.push(state);
  const serve = await startServe(['--state', state, '--admin-token', TOKEN, '--log-level', 'warn']);
  try {
    await registerOver(serve.url);
  } finally {
    serve.child.kill('SIGTERM');
    await serve.exited;
  }
  return state;
}

describe('an anvil that is not there', () => {
  it('says so when AGENTCTL_ANVIL_PATH points nowhere, rather than blame the checkpoint', async () => {
    const nowhere = join(dir, 'no-such-anvil');
    const outcome = await refusal([], [], { AGENTCTL_ANVIL_PATH: nowhere });
    expectRefused(outcome, `AGENTCTL_ANVIL_PATH is ${nowhere}, which does not exist`);
    expect(outcome.stderr).not.toContain('checkpoint');
  });

  it.each([
    ['a directory', () => dir],
    [
      'a file that is not executable',
      () => {
        const file = join(dir, 'not-executable');
        writeFileSync(file, 'not a program\n', { mode: 0o644 });
        return file;
      },
    ],
    [
      'a program that fails at once',
      () => {
        const file = join(dir, 'fails');
        writeFileSync(file, '#!/bin/sh\necho "no such option" >&2\nexit 2\n', { mode: 0o755 });
        return file;
      },
    ],
  ])(
    'says AGENTCTL_ANVIL_PATH does not run as anvil when it names %s, rather than blame the checkpoint',
    async (_what, make) => {
      const path = make();
      const outcome = await refusal([], [], { AGENTCTL_ANVIL_PATH: path });
      expectRefused(
        outcome,
        `AGENTCTL_ANVIL_PATH is ${path}, which does not run as anvil`,
        'unset it',
      );
      expect(outcome.stderr).not.toContain('checkpoint');
    },
  );

  it.runIf(!existsSync('/usr/bin/anvil') && !existsSync('/bin/anvil'))(
    'names the package for this platform and the command that installs it, when none is installed',
    async () => {
      // agentctl as installed without its optional dependency: bin, dist and package.json
      // alone, with no anvil on PATH.
      const installed = join(dir, 'installed');
      for (const part of ['bin', 'dist', 'package.json']) {
        cpSync(join(dirname(BIN), '..', part), join(installed, part), { recursive: true });
      }
      const child = spawn(
        process.execPath,
        [join(installed, 'bin', 'agentctl.js'), 'serve', '--port', '0'],
        { env: { HOME: dir, PATH: '/usr/bin:/bin' }, stdio: ['ignore', 'pipe', 'pipe'] },
      );
      let stderr = '';
      child.stderr.on('data', (chunk) => {
        stderr += chunk;
      });
      const code = await new Promise((resolve) => child.on('exit', resolve));
      const pkg = `@foundry-rs/anvil-${process.platform}-${process.arch === 'x64' ? 'amd64' : process.arch}`;
      expectRefused(
        { code: code as number, stderr },
        `anvil is not installed`,
        `npm install ${pkg}@`,
      );
      expect(stderr).not.toContain('checkpoint');
    },
  );
});

describe('a state directory that cannot be created', () => {
  it('names it and says why, where mkdir fails under a directory that exists (/proc)', async () => {
    // Node's own recursive mkdir spins forever here.
    const outcome = await refusal(['--state', '/proc/x/y']);
    expectRefused(
      outcome,
      'cannot create the state directory /proc/x/y: ',
      'choose another --state directory',
    );
    expect(outcome.stderr).not.toContain('cannot listen');
  });

  it.runIf(canBindReadOnly || !isRoot)('names it under a read-only directory', async () => {
    const readOnly = join(dir, 'read-only');
    mkdirSync(readOnly);
    const state = join(readOnly, 'state');
    let outcome: Outcome;
    if (isRoot) {
      // Root writes anywhere, except on a read-only mount: bind the directory read-only onto itself.
      outcome = await refusal(
        ['--state', state],
        [
          'unshare',
          '--mount',
          '--propagation',
          'private',
          'sh',
          '-c',
          'mount --bind "$0" "$0" && mount -o remount,bind,ro "$0" && exec "$@"',
          readOnly,
        ],
      );
      expectRefused(outcome, `${readOnly} is on a read-only file system (mkdir: EROFS)`);
    } else {
      chmodSync(readOnly, 0o555);
      outcome = await refusal(['--state', state]);
      expectRefused(outcome, `you may not create state in ${readOnly} (mkdir: EACCES)`);
    }
    expectRefused(
      outcome,
      `cannot create the state directory ${state}: `,
      'choose another --state directory',
    );
    expect(outcome.stderr).not.toContain('cannot listen');
  });

  it('names a --state that is a file', async () => {
    const file = join(dir, 'file');
    writeFileSync(file, 'not a directory\n');
    expectRefused(await refusal(['--state', file]), `${file} is not a directory`);
    expectRefused(
      await refusal(['--state', join(file, 'state')]),
      `cannot create the state directory ${join(file, 'state')}: ${file} is not a directory`,
    );
  });
});

// An ordinary user cannot make a directory that belongs to someone else; root can, and then
// runs serve without the capabilities that let it ignore whose files are whose.
describe.runIf(canActAsOrdinaryUser)('a state directory that belongs to another user', () => {
  const me = process.getuid?.();

  it('names the directory it cannot read, its owner, and what to do', async () => {
    const state = await madeState();
    for (const name of ['', ...readdirSync(state, { recursive: true }).map(String)]) {
      chownSync(join(state, name), OTHER_UID, OTHER_UID);
    }
    expectRefused(
      await refusal(['--state', state], AS_ORDINARY_USER),
      `${state} belongs to another user (uid ${OTHER_UID}; you are uid ${me}), so agentctl cannot use it (scandir: EACCES)`,
      `sudo chown -R ${me} ${state}) or choose another --state directory`,
    );
  });

  it('names the directory, or the file in it, whose permissions it cannot set', async () => {
    // Open to everyone, so serve can lock it and write in it, but not change its mode.
    const shared = join(dir, 'shared');
    mkdirSync(shared);
    chmodSync(shared, 0o777);
    chownSync(shared, OTHER_UID, OTHER_UID);
    states.push(shared);
    expectRefused(
      await refusal(['--state', shared], AS_ORDINARY_USER),
      `${shared} belongs to another user (uid ${OTHER_UID}; you are uid ${me}), so agentctl cannot use it (chmod: EPERM)`,
      'choose another --state directory',
    );

    const state = await madeState();
    chownSync(join(state, 'sandbox.db'), OTHER_UID, OTHER_UID);
    expectRefused(
      await refusal(['--state', state], AS_ORDINARY_USER),
      `${join(state, 'sandbox.db')} belongs to another user (uid ${OTHER_UID}; you are uid ${me}), so agentctl cannot use it (chmod: EPERM)`,
      `sudo chown -R ${me} ${state}) or choose another --state directory`,
    );
  });
});

describe('a damaged chain checkpoint', () => {
  it('names the file and the wrong field: null, null fields, a string or foreign chain_id, a misplaced contract', async () => {
    const state = await madeState();
    const [name] = readdirSync(join(state, 'chain'));
    const path = join(state, 'chain', name as string);
    const original = JSON.parse(readFileSync(path, 'utf8'));
    const restore =
      'restore the state directory from a backup, or start with a new --state directory';
    const cases: Array<[unknown, string]> = [
      [null, 'is damaged: it holds null, not a checkpoint (a JSON object)'],
      [{ ...original, chain_id: null }, 'is damaged: chain_id is null, but it must be 84532'],
      [
        { ...original, deployment: null },
        'is damaged: deployment is null, but it must be an object',
      ],
      [
        { ...original, sandbox_id: null },
        'is damaged: sandbox_id is null, but it must be a string',
      ],
      [
        { ...original, chain_id: '84532' },
        `is damaged: chain_id is "84532" (a string), but it must be 84532, the sandbox's chain (Base Sepolia)`,
      ],
      [
        { ...original, chain_id: 8453 },
        `is damaged: chain_id is 8453, but it must be 84532, the sandbox's chain (Base Sepolia)`,
      ],
      [
        { ...original, deployment: { ...original.deployment, usdc: original.deployment.governor } },
        `is damaged: deployment.usdc is ${original.deployment.governor}, which holds another contract than MockUSDC in the chain it holds`,
      ],
    ];
    for (const [content, problem] of cases) {
      writeFileSync(path, JSON.stringify(content));
      expectRefused(
        await refusal(['--state', state]),
        `the chain checkpoint ${path} ${problem}`,
        restore,
      );
    }
    writeFileSync(path, JSON.stringify(original));
    const again = await refusal(['--state', state]);
    expect(again.code, again.stderr).toBe('started');
  });
});

describe('a damaged sandbox.db', () => {
  it('names a truncated database', async () => {
    const state = await madeState();
    const db = join(state, 'sandbox.db');
    truncateSync(db, Math.floor(statSync(db).size / 2));
    expectRefused(
      await refusal(['--state', state]),
      `${db} is damaged (`,
      'restore the whole state directory from one backup, or start with a new --state directory',
    );
  });

  it('refuses, with quick_check’s findings, a database with a damaged page that would start', async () => {
    const state = await madeState();
    const db = join(state, 'sandbox.db');
    // serve's close checkpointed the WAL into the file: every row is in sandbox.db itself.
    expect(readdirSync(state)).not.toContain('sandbox.db-wal');
    const reader = new DatabaseSync(db, { readOnly: true });
    const pageSize = (reader.prepare('PRAGMA page_size').get() as { page_size: number }).page_size;
    const { rootpage } = reader
      .prepare("SELECT rootpage FROM sqlite_schema WHERE name = 'agents'")
      .get() as { rootpage: number };
    reader.close();
    // Overwrite the start of the agents table's cells (the middle of its b-tree page, where its
    // header says the cell content begins): the rows' sizes and ids become garbage.
    const fd = openSync(db, 'r+');
    try {
      const page = Buffer.alloc(pageSize);
      readSync(fd, page, 0, pageSize, (rootpage - 1) * pageSize);
      const cellContent = page.readUInt16BE(5);
      expect(cellContent).toBeGreaterThan(100);
      writeSync(fd, Buffer.alloc(8, 0xff), 0, 8, (rootpage - 1) * pageSize + cellContent);
    } finally {
      closeSync(fd);
    }
    const outcome = await refusal(['--state', state]);
    expectRefused(
      outcome,
      `${db} is damaged (PRAGMA quick_check: `,
      `page ${rootpage}`,
      'restore the whole state directory from one backup, or start with a new --state directory',
    );
  });
});

describe('serve --rpc-url --deployment with a wrong address', () => {
  let node: Awaited<ReturnType<typeof startAnvil>>;
  let nodeDir: string;
  let contracts: SandboxInfo['contracts'];
  beforeAll(async () => {
    nodeDir = mkdtempSync(join(tmpdir(), 'agentctl-serve-startup-node-'));
    node = await startAnvil({ stateDir: nodeDir });
    // A first serve deploys the contracts on that dev chain.
    const serve = await startServe([
      '--rpc-url',
      node.rpcUrl,
      '--state',
      join(nodeDir, 'state'),
      '--admin-token',
      TOKEN,
      '--log-level',
      'warn',
    ]);
    try {
      contracts = SandboxInfo.parse(
        (await requestOver(serve.url, TOKEN, 'GET', '/sandbox/info')).body,
      ).contracts;
    } finally {
      serve.child.kill('SIGTERM');
      await serve.exited;
    }
  }, 60_000);
  afterAll(async () => {
    await node?.stop();
    rmSync(nodeDir, { recursive: true, force: true });
  });

  it('names the contract, the address and the file, for every contract of the deployment', async () => {
    const file = join(dir, 'deployment.json');
    const withAddresses = (changed: object) => {
      writeFileSync(file, JSON.stringify({ ...contracts, ...changed }));
      return refusal(['--rpc-url', node.rpcUrl, '--deployment', file]);
    };
    const nowhere = '0x000000000000000000000000000000000000dEaD';
    expectRefused(
      await withAddresses({ usdc: nowhere }),
      `--deployment ${file}: usdc is ${nowhere}, which has no code on ${node.rpcUrl}`,
      'give the addresses of the sandbox contracts deployed there',
    );
    expectRefused(
      await withAddresses({ usdc: contracts.protocol_token }),
      `--deployment ${file}: usdc is ${contracts.protocol_token}, which holds another contract than MockUSDC on ${node.rpcUrl}`,
    );
    expectRefused(
      await withAddresses({ vaults: { ...contracts.vaults, hedged: contracts.agent_onboarding } }),
      `--deployment ${file}: vaults.hedged is ${contracts.agent_onboarding}, which holds another contract than SandboxVault`,
    );
    // The right addresses start: the contracts' immutables differ from the genesis chain's.
    const right = await withAddresses({});
    expect(right.code, right.stderr).toBe('started');
  });
});
