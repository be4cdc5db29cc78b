import { randomBytes } from 'node:crypto';
import {
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { run as exportSnapshot } from '../../../src/cli/commands/sandbox/export.ts';
import { run as restore } from '../../../src/cli/commands/sandbox/restore.ts';
import { run as snapshot } from '../../../src/cli/commands/sandbox/snapshot.ts';
import { run as snapshotDelete } from '../../../src/cli/commands/sandbox/snapshot-delete.ts';
import { run as snapshots } from '../../../src/cli/commands/sandbox/snapshots.ts';
import type { GlobalOptions } from '../../../src/cli/context.ts';
import { describeFailure } from '../../../src/cli/errors.ts';
import { EXIT } from '../../../src/cli/exit-codes.ts';
import { spawnCli } from '../../helpers/cli.ts';
import {
  capturedContext,
  type Recorded,
  sandboxTime,
  useCannedServer,
} from '../../helpers/run-context.ts';
import { until } from '../../helpers/serve.ts';

/**
 * The snapshot verbs' run() against a plain HTTP server answering the admin API's canned
 * bodies (stamped with the sandbox's clock, as serve stamps them); the export against a
 * server of its own that can hold or cut its body half-way.
 */
const SANDBOX_NOW = 1_796_000_000; // 2026-11-30T00:53:20Z, not the wall clock
const LONG_NAME = `fixture.${'n'.repeat(56)}`; // 64 characters, the most a name may have
const info = (name: string, block: number, agoSeconds: number, size: number) => ({
  name,
  block_number: block,
  created_at: new Date((SANDBOX_NOW - agoSeconds) * 1000).toISOString(),
  size_bytes: size,
});
const LIST = {
  snapshots: [
    info('genesis', 3, 86_400, 912_384),
    info('base', 41, 7200, 3_456_789),
    info(LONG_NAME, 123_456_789, 60, 2_000_000_000),
  ],
};

/** Answers by name: `taken` exists (409 without replace), `busy` is being restored over (503). */
function answer({ method, url, body }: Recorded) {
  const path = url.pathname;
  if (method === 'GET' && path === '/sandbox/snapshots') return { body: LIST };
  if (method === 'POST' && path === '/sandbox/snapshots') {
    const request = JSON.parse(body) as { name: string; replace?: boolean };
    if (request.name === 'taken' && !request.replace) {
      return { status: 409, body: { error: 'snapshot taken exists; pass replace: true' } };
    }
    return { body: info(request.name, 42, 0, 1_572_864) };
  }
  const restored = /^\/sandbox\/snapshots\/([^/]+)\/restore$/.exec(path);
  if (method === 'POST' && restored) {
    if (restored[1] === 'busy') {
      return {
        status: 503,
        headers: { 'retry-after': '1' },
        body: { error: 'a restore is running' },
      };
    }
    if (restored[1] !== 'base') return { status: 404, body: { error: 'no snapshot named x' } };
    return { body: { name: 'base', block_number: 41, restored_in_ms: 83.4 } };
  }
  const named = /^\/sandbox\/snapshots\/([^/]+)$/.exec(path);
  if (method === 'DELETE' && named) {
    if (named[1] === 'genesis') return { status: 409, body: { error: 'genesis is kept' } };
    if (named[1] !== 'base') return { status: 404, body: { error: 'no snapshot named x' } };
    return { body: { name: 'base', deleted: true } };
  }
  return { status: 404, body: { error: 'not found' } };
}

const server = useCannedServer(answer, sandboxTime(SANDBOX_NOW));
let requests: Recorded[];
beforeAll(() => {
  requests = server.requests;
});
const dir = mkdtempSync(join(tmpdir(), 'agentctl-snapshots-run-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function context(globals: GlobalOptions = {}, url = server.url) {
  const { context: made, text } = capturedContext(
    { baseUrl: url, ...globals },
    { AGENTCTL_CONFIG_DIR: join(dir, 'config') },
  );
  return { context: made, stdout: () => text.stdout, stderr: () => text.stderr };
}

/** How the CLI would end for what run() threw: its exit code and --json error code. */
async function failure(work: Promise<void>) {
  const error = await work.then(
    () => undefined,
    (thrown: unknown) => thrown,
  );
  expect(error).toBeDefined();
  const { exitCode, json } = describeFailure(error);
  return { exitCode, code: json.code, message: String(json.error) };
}

describe('snapshot names are checked before any request', () => {
  const bad = ['', 'a b', 'a/b', '../x', 'n'.repeat(65), 'café', 'a?b'];
  it.each([
    ['snapshot', (name: string) => snapshot({ adminToken: 'tok', name }, context().context)],
    ['restore', (name: string) => restore({ adminToken: 'tok', name }, context().context)],
    [
      'snapshot-delete',
      (name: string) => snapshotDelete({ adminToken: 'tok', name }, context().context),
    ],
    [
      'export',
      (name: string) =>
        exportSnapshot({ adminToken: 'tok', name, file: join(dir, 'never') }, context().context),
    ],
  ])('%s refuses a name the contract refuses (exit 2), sending nothing', async (_, verb) => {
    for (const name of bad) {
      const before = requests.length;
      const refused = await failure(verb(name));
      expect(refused).toMatchObject({ exitCode: EXIT.usage, code: 'usage' });
      expect(refused.message).toContain(`snapshot name ${JSON.stringify(name)}`);
      expect(refused.message).toContain('1 to 64 of A-Z a-z 0-9 . _ -');
      expect(requests.length).toBe(before);
    }
    expect(existsSync(join(dir, 'never'))).toBe(false);
  });

  it('refuses . and .. (names of directories), before any request', async () => {
    for (const name of ['.', '..']) {
      const before = requests.length;
      const refused = await failure(restore({ adminToken: 'tok', name }, context().context));
      expect(refused).toMatchObject({ exitCode: EXIT.usage, code: 'usage' });
      expect(refused.message).toBe(`snapshot name "${name}": must not be . or ..`);
      expect(requests.length).toBe(before);
    }
  });

  it('takes a name of 64 of the allowed characters', async () => {
    const { context: ctx, stdout } = context();
    await snapshot({ adminToken: 'tok', name: LONG_NAME }, ctx);
    expect(stdout()).toContain(`snapshot ${LONG_NAME} taken at block 42`);
  });

  it('without a token, says where to get one (exit 4) and sends nothing', async () => {
    const before = requests.length;
    const refused = await failure(
      snapshot({ adminToken: undefined, name: 'x' }, context().context),
    );
    expect(refused.exitCode).toBe(EXIT.auth);
    expect(requests.length).toBe(before);
  });
});

describe('sandbox snapshot', () => {
  it('posts the name with the admin token, and says block and size in one line', async () => {
    const { context: ctx, stdout } = context();
    await snapshot({ adminToken: 'tok', name: 'base' }, ctx);
    const sent = requests.at(-1) as Recorded;
    expect(sent.method).toBe('POST');
    expect(JSON.parse(sent.body)).toEqual({ name: 'base' });
    expect(sent.headers['x-admin-token']).toBe('tok');
    expect(stdout()).toBe('snapshot base taken at block 42 (1.5 MB)\n');
  });

  it('an existing name is a conflict (exit 2, code conflict); --replace sends replace', async () => {
    const refused = await failure(
      snapshot({ adminToken: 'tok', name: 'taken' }, context().context),
    );
    expect(refused).toMatchObject({ exitCode: EXIT.usage, code: 'conflict' });
    expect(refused.message).toContain('exists');
    const { context: ctx, stdout } = context();
    await snapshot({ adminToken: 'tok', name: 'taken', replace: true }, ctx);
    expect(JSON.parse(requests.at(-1)?.body ?? '')).toEqual({ name: 'taken', replace: true });
    expect(stdout()).toContain('snapshot taken taken at block 42');
  });

  it('prints the body as received with --json', async () => {
    const { context: ctx, stdout } = context({ json: true });
    await snapshot({ adminToken: 'tok', name: 'base' }, ctx);
    expect(JSON.parse(stdout())).toEqual(info('base', 42, 0, 1_572_864));
  });
});

describe('sandbox restore', () => {
  it('posts to the snapshot’s restore, one line with block and time taken', async () => {
    const { context: ctx, stdout } = context();
    await restore({ adminToken: 'tok', name: 'base' }, ctx);
    expect(requests.at(-1)).toMatchObject({ method: 'POST' });
    expect(requests.at(-1)?.url.pathname).toBe('/sandbox/snapshots/base/restore');
    expect(stdout()).toBe('restored base: block 41 (in 83 ms)\n');
  });

  it('an unknown snapshot is not found (exit 2, code not_found)', async () => {
    const refused = await failure(restore({ adminToken: 'tok', name: 'nope' }, context().context));
    expect(refused).toMatchObject({ exitCode: EXIT.usage, code: 'not_found' });
  });

  it('a 503 (a restore running) from a service not known to honour keys: tried once, its outcome unknown (exit 7)', async () => {
    const before = requests.length;
    const refused = await failure(restore({ adminToken: 'tok', name: 'busy' }, context().context));
    expect(refused).toMatchObject({ exitCode: EXIT.outcomeUnknown, code: 'outcome_unknown' });
    expect(refused.message).toContain('a restore is running');
    expect(requests.length).toBe(before + 1);
  });

  it('--json: the body as received', async () => {
    const { context: ctx, stdout } = context({ json: true });
    await restore({ adminToken: 'tok', name: 'base' }, ctx);
    expect(JSON.parse(stdout())).toEqual({ name: 'base', block_number: 41, restored_in_ms: 83.4 });
  });
});

describe('sandbox snapshot-delete', () => {
  it('sends DELETE and says which it deleted', async () => {
    const { context: ctx, stdout } = context();
    await snapshotDelete({ adminToken: 'tok', name: 'base' }, ctx);
    expect(requests.at(-1)?.method).toBe('DELETE');
    expect(requests.at(-1)?.url.pathname).toBe('/sandbox/snapshots/base');
    expect(stdout()).toBe('deleted snapshot base\n');
  });

  it('genesis is a conflict, an unknown name not found (exit 2 both)', async () => {
    const genesis = await failure(
      snapshotDelete({ adminToken: 'tok', name: 'genesis' }, context().context),
    );
    expect(genesis).toMatchObject({ exitCode: EXIT.usage, code: 'conflict' });
    const unknown = await failure(
      snapshotDelete({ adminToken: 'tok', name: 'nope' }, context().context),
    );
    expect(unknown).toMatchObject({ exitCode: EXIT.usage, code: 'not_found' });
  });
});

describe('sandbox snapshots', () => {
  it('a table in 80 columns: name, block, created by the sandbox clock, size', async () => {
    const { context: ctx, stdout } = context();
    await snapshots({ adminToken: 'tok' }, ctx);
    const lines = stdout().trimEnd().split('\n');
    expect(Math.max(...lines.map((line) => [...line].length))).toBeLessThanOrEqual(80);
    const rows = lines.filter((line) => /^│ \S/.test(line)).map((line) => line.split('│'));
    const cells = rows.map((row) => row.slice(1, -1).map((cell) => cell.trim()));
    expect(cells[0]).toEqual(['name', 'block', 'created', 'size']);
    expect(cells[1]).toEqual(['genesis', '3', '2026-11-29T00:53:20Z (1 d ago)', '891.0 KB']);
    expect(cells[2]).toEqual(['base', '41', '2026-11-29T22:53:20Z (2 h ago)', '3.3 MB']);
    // The long name clipped to fit, whole with --wide.
    expect(cells[3]?.[0]).toMatch(/^fixture\.n+…$/);
    expect(cells[3]?.slice(1)).toEqual(['123456789', '2026-11-30T00:52:20Z (1 min ago)', '1.9 GB']);
    const wide = context();
    await snapshots({ adminToken: 'tok', wide: true }, wide.context);
    expect(wide.stdout()).toContain(LONG_NAME);
  });

  it('--json: the body as received', async () => {
    const { context: ctx, stdout } = context({ json: true });
    await snapshots({ adminToken: 'tok' }, ctx);
    expect(JSON.parse(stdout())).toEqual(LIST);
  });
});

/**
 * An export server: each GET of /sandbox/snapshots/NAME/export is answered by the next of
 * `plans` (the last one repeats).
 */
type Plan = (response: ServerResponse) => void | Promise<void>;
async function exportServer(plans: Plan[]) {
  const served: string[] = [];
  let next = 0;
  const http: Server = createServer(async (request, response) => {
    served.push(`${request.method} ${request.url} ${request.headers['x-admin-token']}`);
    const plan = plans[Math.min(next++, plans.length - 1)] as Plan;
    await plan(response);
  });
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(http.address() as AddressInfo).port}`,
    served,
    async close() {
      http.closeAllConnections();
      await new Promise((resolve) => http.close(resolve));
    },
  };
}

/** Bytes that are not UTF-8, as an exported file's need not be. */
const EXPORTED = Buffer.concat([Buffer.from([0xff, 0xfe, 0x00, 0x80]), randomBytes(200_000)]);
const whole: Plan = (response) => {
  response.writeHead(200, { 'content-type': 'application/octet-stream' });
  response.end(EXPORTED);
};
/** Half the body, then the connection is cut (a content-length promising all of it). */
const cut: Plan = (response) => {
  response.writeHead(200, {
    'content-type': 'application/octet-stream',
    'content-length': String(EXPORTED.length),
  });
  response.write(EXPORTED.subarray(0, EXPORTED.length / 2), () => response.destroy());
};
const status =
  (code: number, body: unknown): Plan =>
  (response) => {
    response.writeHead(code, { 'content-type': 'application/json' });
    response.end(JSON.stringify(body));
  };

/** The files in `folder`, temporary ones included. */
const entries = (folder: string) => readdirSync(folder).sort();

describe('sandbox export', () => {
  let n = 0;
  /** A new empty folder for one test's file. */
  const folder = () => {
    const made = join(dir, `export-${n++}`);
    rmSync(made, { recursive: true, force: true });
    mkdtempSync(`${made}-`);
    return readdirSync(dir)
      .map((entry) => join(dir, entry))
      .filter((entry) => entry.startsWith(`${made}-`))[0] as string;
  };

  it('writes the bytes exactly, mode 0600, says so in a line and that the file is a secret', async () => {
    const fake = await exportServer([whole]);
    try {
      const at = folder();
      const file = join(at, 'base.sandbox');
      const { context: ctx, stdout, stderr } = context({}, fake.url);
      await exportSnapshot({ adminToken: 'tok', name: 'base', file }, ctx);
      await ctx.close();
      expect(readFileSync(file).equals(EXPORTED)).toBe(true);
      expect(statSync(file).mode & 0o777).toBe(0o600);
      expect(entries(at)).toEqual(['base.sandbox']);
      expect(fake.served).toEqual(['GET /sandbox/snapshots/base/export tok']);
      expect(stdout()).toBe(`exported base to ${file} (195.3 KB, mode 0600)\n`);
      expect(stderr()).toContain('wallet.mnemonic');
      expect(stderr()).toContain('keep it secret');
    } finally {
      await fake.close();
    }
  });

  it('--json: name, absolute path and size as a JSON object', async () => {
    const fake = await exportServer([whole]);
    try {
      const at = folder();
      const { context: ctx, stdout } = context({ json: true }, fake.url);
      await exportSnapshot({ adminToken: 'tok', name: 'base', file: join(at, 'f') }, ctx);
      await ctx.close();
      expect(JSON.parse(stdout())).toEqual({
        name: 'base',
        file: join(at, 'f'),
        size_bytes: EXPORTED.length,
      });
    } finally {
      await fake.close();
    }
  });

  it('never shows a partial file: FILE appears only once the whole body is on disk', async () => {
    let release = () => {};
    const released = new Promise<void>((resolve) => {
      release = resolve;
    });
    const held: Plan = async (response) => {
      response.writeHead(200, { 'content-type': 'application/octet-stream' });
      response.write(EXPORTED.subarray(0, 1000));
      await released;
      response.end(EXPORTED.subarray(1000));
    };
    const fake = await exportServer([held]);
    try {
      const at = folder();
      const file = join(at, 'base.sandbox');
      const { context: ctx } = context({}, fake.url);
      const done = exportSnapshot({ adminToken: 'tok', name: 'base', file }, ctx);
      // The first bytes are in a temporary file beside it, 0600 already; FILE is not there.
      await until(() => entries(at).some((entry) => statSync(join(at, entry)).size === 1000));
      const [temp] = entries(at);
      expect(temp).toMatch(/^\.base\.sandbox\.[0-9a-f]+\.tmp$/);
      expect(statSync(join(at, temp as string)).mode & 0o777).toBe(0o600);
      expect(existsSync(file)).toBe(false);
      release();
      await done;
      await ctx.close();
      expect(readFileSync(file).equals(EXPORTED)).toBe(true);
      expect(entries(at)).toEqual(['base.sandbox']);
    } finally {
      release();
      await fake.close();
    }
  });

  it('a body cut short and retried gives the whole file, not the halves together', async () => {
    const fake = await exportServer([cut, whole]);
    try {
      const at = folder();
      const file = join(at, 'base.sandbox');
      const { context: ctx } = context({}, fake.url);
      await exportSnapshot({ adminToken: 'tok', name: 'base', file }, ctx);
      await ctx.close();
      expect(fake.served).toHaveLength(2);
      expect(readFileSync(file).equals(EXPORTED)).toBe(true);
      expect(entries(at)).toEqual(['base.sandbox']);
    } finally {
      await fake.close();
    }
  });

  it('a failure after half the body leaves nothing: no FILE, no temporary file', async () => {
    const fake = await exportServer([cut, status(404, { error: 'no snapshot named base' })]);
    try {
      const at = folder();
      const { context: ctx } = context({}, fake.url);
      const refused = await failure(
        exportSnapshot({ adminToken: 'tok', name: 'base', file: join(at, 'base.sandbox') }, ctx),
      );
      await ctx.close();
      expect(refused).toMatchObject({ exitCode: EXIT.usage, code: 'not_found' });
      expect(entries(at)).toEqual([]);
    } finally {
      await fake.close();
    }
  });

  it('an unknown snapshot is not found (exit 2), and no file is made', async () => {
    const fake = await exportServer([status(404, { error: 'no snapshot named nope' })]);
    try {
      const at = folder();
      const { context: ctx } = context({}, fake.url);
      const refused = await failure(
        exportSnapshot({ adminToken: 'tok', name: 'nope', file: join(at, 'x') }, ctx),
      );
      await ctx.close();
      expect(refused).toMatchObject({ exitCode: EXIT.usage, code: 'not_found' });
      expect(entries(at)).toEqual([]);
    } finally {
      await fake.close();
    }
  });

  it('refuses to overwrite FILE (exit 2) before any request, unless --force', async () => {
    const fake = await exportServer([whole]);
    try {
      const at = folder();
      const file = join(at, 'base.sandbox');
      writeFileSync(file, 'kept', { mode: 0o644 });
      const { context: ctx } = context({}, fake.url);
      const refused = await failure(exportSnapshot({ adminToken: 'tok', name: 'base', file }, ctx));
      expect(refused.exitCode).toBe(EXIT.usage);
      expect(refused.message).toContain('exists');
      expect(refused.message).toContain('--force');
      expect(fake.served).toEqual([]);
      expect(readFileSync(file, 'utf8')).toBe('kept');
      await exportSnapshot({ adminToken: 'tok', name: 'base', file, force: true }, ctx);
      await ctx.close();
      expect(readFileSync(file).equals(EXPORTED)).toBe(true);
      // The new file is the secret's, 0600, not the old one's mode.
      expect(statSync(file).mode & 0o777).toBe(0o600);
      expect(entries(at)).toEqual(['base.sandbox']);
    } finally {
      await fake.close();
    }
  });

  it('does not replace a FILE that appears while it is written', async () => {
    let release = () => {};
    const released = new Promise<void>((resolve) => {
      release = resolve;
    });
    const held: Plan = async (response) => {
      response.writeHead(200, { 'content-type': 'application/octet-stream' });
      response.write(EXPORTED.subarray(0, 10));
      await released;
      response.end(EXPORTED.subarray(10));
    };
    const fake = await exportServer([held]);
    try {
      const at = folder();
      const file = join(at, 'base.sandbox');
      const { context: ctx } = context({}, fake.url);
      const done = failure(exportSnapshot({ adminToken: 'tok', name: 'base', file }, ctx));
      await until(() => entries(at).length === 1);
      writeFileSync(file, 'someone else’s');
      release();
      const refused = await done;
      await ctx.close();
      expect(refused.exitCode).toBe(EXIT.usage);
      expect(refused.message).toContain('appeared while it was being written');
      expect(readFileSync(file, 'utf8')).toBe('someone else’s');
      expect(entries(at)).toEqual(['base.sandbox']);
    } finally {
      release();
      await fake.close();
    }
  });

  it('Ctrl-C half-way (the built binary): exit 130, no FILE, no temporary file', async () => {
    const held: Plan = (response) => {
      response.writeHead(200, { 'content-type': 'application/octet-stream' });
      response.write(EXPORTED.subarray(0, 1000));
    };
    const fake = await exportServer([held]);
    try {
      const at = folder();
      const run = spawnCli(['sandbox', 'export', 'base', join(at, 'base.sandbox')], {
        AGENTCTL_BASE_URL: fake.url,
        AGENTCTL_ADMIN_TOKEN: 'tok',
        AGENTCTL_CONFIG_DIR: join(dir, 'config'),
      });
      await until(() => entries(at).some((entry) => statSync(join(at, entry)).size === 1000));
      run.child.kill('SIGINT');
      expect(await run.exited).toBe(EXIT.cancelled);
      expect(run.stderr()).toBe('agentctl: cancelled\n');
      expect(entries(at)).toEqual([]);
    } finally {
      await fake.close();
    }
  });

  it('refuses a directory as FILE, and a FILE whose folder does not exist', async () => {
    const at = folder();
    const directory = await failure(
      exportSnapshot({ adminToken: 'tok', name: 'base', file: at, force: true }, context().context),
    );
    expect(directory.exitCode).toBe(EXIT.usage);
    expect(directory.message).toContain('is a directory');
    const fake = await exportServer([whole]);
    try {
      const missing = await failure(
        exportSnapshot(
          { adminToken: 'tok', name: 'base', file: join(at, 'no', 'such', 'f') },
          context({}, fake.url).context,
        ),
      );
      expect(missing.exitCode).toBe(EXIT.failure);
      expect(missing.message).toContain('its directory does not exist');
    } finally {
      await fake.close();
    }
  });
});
