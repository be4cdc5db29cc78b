/**
 * A throwaway PostgreSQL for the tests: one cluster per test run, started by the first test file
 * that asks for a database, and one database per test file.
 *
 * The cluster lives in a temporary directory that vitest's global setup (postgres-global.ts)
 * creates and provides as `postgresRoot`; that setup's teardown stops the cluster and removes the
 * directory. A test file calls freshDatabase() (e.g. in beforeAll) and drops the database after.
 * The first call in the run starts the cluster (initdb and a start: about 1.5 s); the calls of
 * every other worker wait for it, so files that never ask for a database pay nothing.
 *
 * The server binaries are the newest Debian ones (/usr/lib/postgresql/N/bin), or the directory in
 * AGENTCTL_TEST_PG_BIN (Homebrew's, say). initdb and postgres refuse to run as root, so under root
 * (CI) they run as the `postgres` user (`nobody` without it); otherwise as the current user.
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  chownSync,
  existsSync,
  readdirSync,
  readFileSync,
  renameSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import pg from 'pg';
import { inject } from 'vitest';

const run = promisify(execFile);

declare module 'vitest' {
  export interface ProvidedContext {
    /** The directory of the run's PostgreSQL cluster (see postgres-global.ts). */
    postgresRoot: string;
  }
}

/**
 * The backend a test keeps a sandbox's state in when it does not say: SQLite, or with
 * AGENTCTL_TEST_BACKEND=postgres (the vitest project `postgres`, see vitest.config.ts) a fresh
 * database of the run's cluster.
 */
export function testBackend(): 'sqlite' | 'postgres' {
  // Read at each call, not once at import: the project's env is what says (a module loaded
  // once per worker, with isolate: false, must not keep another file's answer).
  return process.env.AGENTCTL_TEST_BACKEND === 'postgres' ? 'postgres' : 'sqlite';
}

/** What seals the wallet mnemonic of a test sandbox kept in PostgreSQL. */
export const TEST_SANDBOX_SECRET = 'test-sandbox-secret-of-32-characters-or-more';

/** The role initdb creates (the cluster's superuser); tests connect as it, without a password. */
const SUPERUSER = 'agentctl';
const DEBIAN_ROOT = '/usr/lib/postgresql';
/** How long one start may take (pg_ctl -t), and how long a file waits for another's start. */
const START_SECONDS = 20;
const WAIT_FOR_OTHER_MS = 25_000;

/** The directory with initdb, pg_ctl and postgres: AGENTCTL_TEST_PG_BIN, else Debian's newest. */
export function postgresBinDir(env: NodeJS.ProcessEnv = process.env): string {
  const override = env.AGENTCTL_TEST_PG_BIN;
  if (override) {
    if (!existsSync(join(override, 'initdb'))) {
      throw new Error(
        `AGENTCTL_TEST_PG_BIN=${override} holds no initdb: give the directory of PostgreSQL's ` +
          'server binaries (initdb, pg_ctl, postgres), e.g. /opt/homebrew/opt/postgresql@17/bin',
      );
    }
    return override;
  }
  const versions = existsSync(DEBIAN_ROOT)
    ? readdirSync(DEBIAN_ROOT)
        .filter((name) => /^\d+$/.test(name) && existsSync(join(DEBIAN_ROOT, name, 'bin/initdb')))
        .sort((a, b) => Number(b) - Number(a))
    : [];
  if (versions[0] === undefined) {
    throw new Error(
      `These tests need PostgreSQL's server binaries (initdb, pg_ctl, postgres), and there are ` +
        `none in ${DEBIAN_ROOT}/*/bin: install them (apt-get install postgresql), or set ` +
        'AGENTCTL_TEST_PG_BIN to a directory holding them, e.g. ' +
        '/opt/homebrew/opt/postgresql@17/bin',
    );
  }
  return join(DEBIAN_ROOT, versions[0], 'bin');
}

/** Who runs initdb and postgres: null for the current user, else a user to switch to (root). */
async function serverUser(): Promise<{ name: string; uid: number; gid: number } | null> {
  if (process.getuid?.() !== 0) return null;
  for (const name of ['postgres', 'nobody']) {
    try {
      const uid = Number((await run('id', ['-u', name])).stdout.trim());
      const gid = Number((await run('id', ['-g', name])).stdout.trim());
      return { name, uid, gid };
    } catch {
      // No such user: try the next.
    }
  }
  throw new Error(
    'running as root, and there is neither a postgres nor a nobody user to run PostgreSQL as',
  );
}

/** A port free on 127.0.0.1 a moment ago (another process may take it before postgres does). */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() =>
        typeof address === 'object' && address
          ? resolve(address.port)
          : reject(new Error('no port')),
      );
    });
  });
}

function logTail(log: string, from: number): string {
  if (!existsSync(log)) return '(no server log)';
  return readFileSync(log, 'utf8').slice(from).trimEnd().split('\n').slice(-20).join('\n');
}

/** A cluster's files, all inside the one directory `root`. */
function clusterPaths(root: string) {
  return {
    data: join(root, 'data'),
    log: join(root, 'server.log'),
    /** Created (exclusively) by the one test file that starts the cluster. */
    claim: join(root, 'claim'),
    /** Written once the cluster answers: { url }. */
    ready: join(root, 'cluster.json'),
    /** Written instead when the start failed: the error's message. */
    failed: join(root, 'failed'),
  };
}

interface Server {
  bin: string;
  user: Awaited<ReturnType<typeof serverUser>>;
  root: string;
}

/** Runs one of the server binaries as the server's user, in the cluster's directory. */
function runAsServer(server: Server, program: string, args: string[]) {
  const path = join(server.bin, program);
  const [command, argv] = server.user
    ? ['runuser', ['-u', server.user.name, '--', path, ...args]]
    : [path, args];
  return run(command, argv, { cwd: server.root, env: { ...process.env, LC_ALL: 'C' } });
}

/**
 * Creates a cluster in `root` (an empty directory) and starts it on a free loopback port;
 * resolves with the superuser's URL to the `postgres` database. Made for tests: nothing is
 * fsynced (initdb --no-sync, fsync=off), as a crash of the machine would only lose a cluster no
 * test outlives. A crash of the server loses nothing committed (the OS holds the writes), so
 * commits stay synchronous: tests that kill processes may count on what was acknowledged.
 * `durable` (the bench, whose figures must include a commit's fsync, as SQLite's do) keeps
 * PostgreSQL's defaults: every commit flushed.
 */
export async function startCluster(root: string, { durable = false } = {}): Promise<string> {
  const server: Server = { bin: postgresBinDir(), user: await serverUser(), root };
  const paths = clusterPaths(root);
  if (server.user) chownSync(root, server.user.uid, server.user.gid);
  await runAsServer(server, 'initdb', [
    '-D',
    paths.data,
    '-A',
    'trust',
    '-U',
    SUPERUSER,
    '-E',
    'UTF8',
    '--locale=C',
    ...(durable ? [] : ['--no-sync']),
    '--no-instructions',
  ]).catch((error: { stderr?: string }) => {
    throw new Error(`initdb failed:\n${error.stderr ?? error}`);
  });
  // Appended by root under CI: the file keeps its owner, the server's user.
  writeFileSync(
    join(paths.data, 'postgresql.conf'),
    [
      '',
      '# test/helpers/postgres.ts: a throwaway cluster for tests',
      "listen_addresses = '127.0.0.1'",
      `unix_socket_directories = '${root.replaceAll("'", "''")}'`,
      ...(durable ? [] : ['fsync = off', 'full_page_writes = off', 'shared_buffers = 16MB']),
      '',
    ].join('\n'),
    { flag: 'a' },
  );
  for (let attempt = 1; ; attempt++) {
    const port = await freePort();
    const logFrom = existsSync(paths.log) ? statSync(paths.log).size : 0;
    try {
      await runAsServer(server, 'pg_ctl', [
        'start',
        '-D',
        paths.data,
        '-l',
        paths.log,
        '-w',
        '-t',
        String(START_SECONDS),
        '-o',
        `-p ${port}`,
      ]);
      return `postgres://${SUPERUSER}@127.0.0.1:${port}/postgres`;
    } catch (error) {
      const tail = logTail(paths.log, logFrom);
      // Another process took the port between freePort() and the bind: try another.
      if (/Address already in use/.test(tail) && attempt < 5) continue;
      const { stdout, stderr } = error as { stdout?: string; stderr?: string };
      const said = `${stdout ?? ''}${stderr ?? ''}`.trim() || String(error);
      throw new Error(
        `PostgreSQL did not start within ${START_SECONDS} s on port ${port} (${said}); ` +
          `the end of its log ${paths.log}:\n${tail}`,
      );
    }
  }
}

/** Stops the cluster in `root` at once, if one was created there (nothing in it is kept). */
export async function stopCluster(root: string): Promise<void> {
  const paths = clusterPaths(root);
  if (!existsSync(join(paths.data, 'postmaster.pid'))) return;
  const server: Server = { bin: postgresBinDir(), user: await serverUser(), root };
  await runAsServer(server, 'pg_ctl', ['stop', '-D', paths.data, '-m', 'immediate', '-w']);
}

/**
 * The URL of the run's cluster, started by the first caller among all the test files (workers)
 * of the run; the others wait for it, and share its failure.
 */
let clusterUrl: Promise<string> | undefined;

function runCluster(): Promise<string> {
  clusterUrl ??= (async () => {
    const root = inject('postgresRoot');
    if (!root) throw new Error('no postgresRoot: vitest.config.ts must list postgres-global.ts');
    const paths = clusterPaths(root);
    let claimed = false;
    try {
      writeFileSync(paths.claim, String(process.pid), { flag: 'wx' });
      claimed = true;
    } catch {
      // Another test file starts it.
    }
    if (claimed) {
      try {
        const url = await startCluster(root);
        writeFileSync(`${paths.ready}.tmp`, JSON.stringify({ url }));
        renameSync(`${paths.ready}.tmp`, paths.ready);
        return url;
      } catch (error) {
        writeFileSync(paths.failed, (error as Error).message);
        throw error;
      }
    }
    for (const deadline = Date.now() + WAIT_FOR_OTHER_MS; Date.now() < deadline; ) {
      if (existsSync(paths.ready)) return JSON.parse(readFileSync(paths.ready, 'utf8')).url;
      if (existsSync(paths.failed)) throw new Error(readFileSync(paths.failed, 'utf8'));
      await sleep(50);
    }
    throw new Error(
      `another test file started PostgreSQL in ${root} and it did not answer within ` +
        `${WAIT_FOR_OTHER_MS / 1000} s; its log: ${paths.log}`,
    );
  })();
  return clusterUrl;
}

export interface FreshDatabase {
  /** The database's name, test_<random>. */
  name: string;
  /** A URL to it, as the cluster's superuser. */
  url: string;
  /** Drops it, closing its connections first. */
  drop(): Promise<void>;
}

/** Runs SQL on the cluster's `postgres` database, on a connection of its own. */
async function onCluster(sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: await runCluster() });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

/**
 * A new, empty database on the run's cluster, started on first use. Fails, rather than skips,
 * when PostgreSQL's binaries are missing (the error says how to install them).
 *
 * @example
 * let db: FreshDatabase;
 * beforeAll(async () => { db = await freshDatabase(); });
 * afterAll(() => db?.drop());
 */
export async function freshDatabase(): Promise<FreshDatabase> {
  const adminUrl = await runCluster();
  const name = `test_${randomBytes(6).toString('hex')}`;
  await onCluster(`CREATE DATABASE ${name}`);
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  return {
    name,
    url: url.toString(),
    drop: () => onCluster(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`),
  };
}
