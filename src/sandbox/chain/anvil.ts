import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { CHAIN_ID } from '../../api/schemas/index.ts';
import { StartupError } from '../errors.ts';
import { isRunning } from '../process.ts';

/**
 * Which anvil of a sandbox a process is: the one holding the chain, or its warm standby (see
 * standby.ts). Each has a pid file of its own in the state dir.
 */
export type AnvilRole = 'primary' | 'standby';
const PID_FILES: Record<AnvilRole, string> = {
  primary: 'anvil.pid',
  standby: 'anvil-standby.pid',
};
const READY_TIMEOUT_MS = 15_000;
/**
 * Set in the environment of every anvil a sandbox starts: a later serve finds an anvil left
 * behind by its state dir even when anvil.pid is gone.
 */
const STATE_DIR_MARKER = 'AGENTCTL_SANDBOX_STATE_DIR';
/** Room for many batched writes per block; a real L2 block holds far more than 30M gas. */
const BLOCK_GAS_LIMIT = 300_000_000;

export class AnvilError extends StartupError {}

/**
 * anvil is not there to run: the start fails with this alone (not as a damaged checkpoint),
 * naming the fix.
 */
export class AnvilMissingError extends AnvilError {}

/** The anvil release agentctl depends on: package.json's optionalDependencies (a test checks). */
export const ANVIL_VERSION = '1.7.1';

/**
 * The npm package holding anvil for `platform` and `arch`, as `@foundry-rs/anvil` names its
 * platform packages (`@foundry-rs/anvil-darwin-arm64`, `…-linux-amd64`, `…-win32-amd64`).
 */
export function anvilPackage(platform: string = process.platform, arch: string = process.arch) {
  return `@foundry-rs/anvil-${platform}-${arch === 'x64' ? 'amd64' : arch}`;
}

/** The command that installs anvil's package for this platform (run where agentctl is). */
export function anvilInstallCommand(
  platform: string = process.platform,
  arch: string = process.arch,
): string {
  return `npm install ${anvilPackage(platform, arch)}@${ANVIL_VERSION}`;
}

/** What to say when no anvil could be found for this platform. */
export function anvilMissingMessage(
  platform: string = process.platform,
  arch: string = process.arch,
): string {
  const pkg = anvilPackage(platform, arch);
  return (
    `anvil is not installed: serve runs the one in the npm package ${pkg} (an optional ` +
    "dependency of agentctl), or Foundry's anvil on PATH. Install it with " +
    `\`${anvilInstallCommand(platform, arch)}\` where agentctl is installed (add -g for a global ` +
    'install), set AGENTCTL_ANVIL_PATH to an anvil binary, or use --rpc-url'
  );
}

/**
 * What to say when AGENTCTL_ANVIL_PATH names something that does not run as anvil (not
 * executable, not a program, a directory, or a program that fails at once), with the fix.
 */
export function anvilPathMessage(path: string, why: string): string {
  return (
    `AGENTCTL_ANVIL_PATH is ${path}, which does not run as anvil (${why}): point it at an anvil ` +
    `binary, or unset it to use the npm package ${anvilPackage()}`
  );
}

/**
 * Where the anvil binary is: `AGENTCTL_ANVIL_PATH`, else the npm package
 * `@foundry-rs/anvil-<platform>-<arch>` (the binary package that `@foundry-rs/anvil`
 * itself installs), else `anvil` on PATH (a Foundry install).
 */
export function resolveAnvilBinary(env: NodeJS.ProcessEnv = process.env): string {
  if (env.AGENTCTL_ANVIL_PATH) {
    if (!existsSync(env.AGENTCTL_ANVIL_PATH)) {
      throw new AnvilMissingError(
        `AGENTCTL_ANVIL_PATH is ${env.AGENTCTL_ANVIL_PATH}, which does not exist: point it at an anvil binary, or unset it to use the npm package ${anvilPackage()}`,
      );
    }
    return env.AGENTCTL_ANVIL_PATH;
  }
  const binary = process.platform === 'win32' ? 'anvil.exe' : 'anvil';
  const require = createRequire(import.meta.url);
  try {
    const manifest = require.resolve(`${anvilPackage()}/package.json`);
    const path = join(manifest, '..', 'bin', binary);
    if (existsSync(path)) return path;
  } catch {
    // Not installed for this platform: fall back to PATH.
  }
  return binary;
}

/**
 * serve's environment, but for agentctl's own variables (the secret that seals the wallet
 * mnemonic, the admin token, the database's URL) and libpq's (PGPASSWORD and the rest): anvil
 * has no use for them, and a process's environment is readable by its user (/proc/PID/environ).
 */
function anvilEnvironment(): NodeJS.ProcessEnv {
  return Object.fromEntries(
    Object.entries(process.env).filter(
      ([name]) => !name.startsWith('AGENTCTL_') && !/^PG[A-Z]/.test(name),
    ),
  );
}

export interface AnvilProcess {
  rpcUrl: string;
  pid: number;
  /** False once anvil has exited, for whatever reason. */
  running(): boolean;
  /** Resolves when anvil exits, for whatever reason. */
  exited: Promise<void>;
  /**
   * Records this anvil under `role` from now on (a standby promoted to primary): its pid file
   * is written, and the other role's removed if it names this anvil.
   */
  recordAs(role: AnvilRole): void;
  /** Stops anvil and removes its pidfile (if it still names this anvil). */
  stop(): Promise<void>;
}

/**
 * Starts anvil on a free loopback port and waits until it listens. Its pid goes into its
 * role's pid file in `stateDir` (`anvil.pid` for the primary); an anvil that file still names
 * is stopped first, so no anvil outlives the sandbox that started it by more than one
 * restart. Call only while holding the state dir's lock.
 */
export async function startAnvil(options: {
  stateDir: string;
  /** `primary` when absent. */
  role?: AnvilRole;
  chainId?: number;
  binary?: string;
  /** A fixed port (a restarted anvil keeps its URL); a free one when 0 or absent. */
  port?: number;
  /**
   * `manual`: no block is mined until the sandbox mines one (it is then the only block
   * producer, and every block goes into its log). `auto`: a block per transaction, as anvil
   * does by default (a plain dev node, as a test's external chain).
   */
  mining?: 'manual' | 'auto';
  /** The genesis block's timestamp (a repeatable build); now when absent. */
  genesisTimestamp?: number;
  /**
   * A state file (anvil's dump, as JSON) to start from. Loaded at start rather than with
   * anvil_loadState, whose request body anvil caps at a size a sandbox's chain soon exceeds.
   */
  loadState?: string;
}): Promise<AnvilProcess> {
  const role = options.role ?? 'primary';
  // This state dir is locked by us, so whatever serve started that anvil is gone.
  stopRecordedAnvil(options.stateDir, role);
  const binary = options.binary ?? resolveAnvilBinary();
  const child = spawn(
    binary,
    [
      '--host',
      '127.0.0.1',
      '--port',
      String(options.port ?? 0),
      '--chain-id',
      String(options.chainId ?? CHAIN_ID),
      // The sandbox funds its own accounts; anvil's well-known dev keys get nothing.
      '--accounts',
      '0',
      '--disable-console-log',
      // No web page may drive the chain from a browser (anvil_reset, say).
      '--no-cors',
      '--gas-limit',
      String(BLOCK_GAS_LIMIT),
      ...(options.mining === 'manual' ? ['--no-mining', '--prune-history', '64'] : []),
      ...(options.genesisTimestamp ? ['--timestamp', String(options.genesisTimestamp)] : []),
      ...(options.loadState ? ['--load-state', options.loadState] : []),
    ],
    // Its own process group: a Ctrl-C in the terminal reaches serve, which then stops
    // anvil after the work in flight, instead of killing the chain under it.
    {
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
      env: { ...anvilEnvironment(), [STATE_DIR_MARKER]: options.stateDir },
    },
  );
  const exited = new Promise<void>((resolveExit) => child.once('exit', () => resolveExit()));
  // Recorded before anything can go wrong, so a serve killed during start-up is cleaned up too:
  // the anvil's pid, then the pid of the serve that owns it.
  if (child.pid !== undefined) writePidFile(options.stateDir, role, child.pid);
  let rpcUrl: string;
  try {
    rpcUrl = await waitForListening(child, binary);
  } catch (error) {
    if (child.pid !== undefined) removePidFile(options.stateDir, role, child.pid);
    // A program given as anvil that failed at once: say so, if it is not anvil at all.
    if (
      !(error instanceof AnvilMissingError) &&
      binary === process.env.AGENTCTL_ANVIL_PATH &&
      !(await answersAsAnvil(binary))
    ) {
      throw new AnvilMissingError(anvilPathMessage(binary, (error as Error).message));
    }
    throw error;
  }
  const pid = child.pid as number;
  const port = Number(new URL(rpcUrl).port);
  // With its port, so that a serve started after a kill -9 of this one can take it over.
  writePidFile(options.stateDir, role, pid, port);
  const running = () => child.exitCode === null && child.signalCode === null;
  return recorded(options.stateDir, role, { rpcUrl, pid, port, running, exited }, async () => {
    if (running()) {
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 3000);
      await exited;
      clearTimeout(timer);
    }
  });
}

/** An AnvilProcess whose pid file follows its role (recordAs) and goes when it is stopped. */
function recorded(
  stateDir: string,
  initialRole: AnvilRole,
  anvil: Pick<AnvilProcess, 'rpcUrl' | 'pid' | 'running' | 'exited'> & { port: number },
  end: () => Promise<void>,
): AnvilProcess {
  let role = initialRole;
  return {
    rpcUrl: anvil.rpcUrl,
    pid: anvil.pid,
    running: anvil.running,
    exited: anvil.exited,
    recordAs(next) {
      writePidFile(stateDir, next, anvil.pid, anvil.port);
      if (next !== role) removePidFile(stateDir, role, anvil.pid);
      role = next;
    },
    async stop() {
      await end();
      removePidFile(stateDir, role, anvil.pid);
    },
  };
}

/** A pid file: the anvil's pid, the pid of the serve that owns it, and its port once known. */
function writePidFile(stateDir: string, role: AnvilRole, anvilPid: number, port?: number): void {
  // Written whole and renamed into place: a reader never sees it empty.
  const path = join(stateDir, PID_FILES[role]);
  writeFileSync(
    `${path}.tmp`,
    `${anvilPid} ${process.pid}${port === undefined ? '' : ` ${port}`}\n`,
    { mode: 0o600 },
  );
  renameSync(`${path}.tmp`, path);
}

/** Removes `role`'s pid file if it names `anvilPid` (another anvil may have taken the role). */
function removePidFile(stateDir: string, role: AnvilRole, anvilPid: number): void {
  if (readPidFile(stateDir, role).anvil === anvilPid) {
    rmSync(join(stateDir, PID_FILES[role]), { force: true });
  }
}

function readPidFile(
  stateDir: string,
  role: AnvilRole,
): { anvil?: number; serve?: number; port?: number } {
  let text: string;
  try {
    text = readFileSync(join(stateDir, PID_FILES[role]), 'utf8');
  } catch {
    return {};
  }
  const [anvil, serve, port] = text.trim().split(/\s+/).map(Number);
  const valid = (n: number | undefined) =>
    n !== undefined && Number.isInteger(n) && n > 0 ? n : undefined;
  return { anvil: valid(anvil), serve: valid(serve), port: valid(port) };
}

/** Stops the anvil `role`'s pid file names, if it is an anvil of this dir. Holding the lock. */
function stopRecordedAnvil(stateDir: string, role: AnvilRole): void {
  const { anvil } = readPidFile(stateDir, role);
  if (anvil !== undefined && isAnvil(anvil) && startedFor(anvil, stateDir)) killQuietly(anvil);
  rmSync(join(stateDir, PID_FILES[role]), { force: true });
}

export interface SurvivingAnvil {
  pid: number;
  port: number;
}

/**
 * The anvils a serve of this state dir left running when it was killed (kill -9), which the
 * next serve takes over rather than rebuilding its chain: the primary's and the standby's pid
 * and port, each when there is one and its serve is gone. Every other anvil started for this
 * dir is stopped. Call only while holding the state dir's lock.
 */
export function survivingAnvils(stateDir: string): Partial<Record<AnvilRole, SurvivingAnvil>> {
  const found: Partial<Record<AnvilRole, SurvivingAnvil>> = {};
  for (const role of ['primary', 'standby'] as const) {
    const recorded = readPidFile(stateDir, role);
    if (recorded.anvil === undefined || recorded.port === undefined) continue;
    if (
      recorded.serve !== undefined &&
      recorded.serve !== process.pid &&
      isRunning(recorded.serve)
    ) {
      continue;
    }
    // A serve killed while it promoted its standby left both files naming one anvil.
    if (role === 'standby' && found.primary?.pid === recorded.anvil) continue;
    if (isAnvil(recorded.anvil) && startedFor(recorded.anvil, stateDir)) {
      found[role] = { pid: recorded.anvil, port: recorded.port };
    }
  }
  const kept = new Set([found.primary?.pid, found.standby?.pid]);
  for (const pid of anvilsStartedFor(stateDir)) if (!kept.has(pid)) killQuietly(pid);
  for (const role of ['primary', 'standby'] as const) {
    if (!found[role]) rmSync(join(stateDir, PID_FILES[role]), { force: true });
  }
  return found;
}

/**
 * How often a taken-over anvil, not our child, is checked to be still running (a read of
 * /proc, or a signal 0): its death is noticed within this, and its standby takes over.
 */
const ADOPTED_CHECK_MS = 25;

/**
 * An anvil found running by `survivingAnvils`, as this serve's own: its pid file names this
 * serve from now on, and its end is noticed by looking at its pid (it is not our child).
 */
export function adoptAnvil(stateDir: string, found: SurvivingAnvil, role: AnvilRole): AnvilProcess {
  writePidFile(stateDir, role, found.pid, found.port);
  const alive = () => isAnvil(found.pid);
  let timer: NodeJS.Timeout | undefined;
  const exited = new Promise<void>((resolveExit) => {
    timer = setInterval(() => {
      if (alive()) return;
      clearInterval(timer);
      resolveExit();
    }, ADOPTED_CHECK_MS);
    timer.unref();
  });
  const rpcUrl = `http://127.0.0.1:${found.port}`;
  return recorded(
    stateDir,
    role,
    { rpcUrl, pid: found.pid, port: found.port, running: alive, exited },
    async () => {
      if (alive()) {
        killQuietly(found.pid, 'SIGTERM');
        for (let waited = 0; alive() && waited < 3000; waited += 20) {
          await new Promise((resolve) => setTimeout(resolve, 20));
        }
        if (alive()) killQuietly(found.pid);
      }
      clearInterval(timer);
    },
  );
}

function waitForListening(child: ChildProcess, binary: string): Promise<string> {
  return new Promise((resolveUrl, reject) => {
    let stderr = '';
    const fail = (message: string) => {
      clearTimeout(timer);
      child.kill('SIGKILL');
      reject(new AnvilError(message));
    };
    const timer = setTimeout(
      () => fail(`anvil did not start listening within ${READY_TIMEOUT_MS / 1000} s`),
      READY_TIMEOUT_MS,
    );
    child.stderr?.on('data', (chunk: Buffer) => {
      stderr = (stderr + chunk.toString()).slice(-2000);
    });
    child.once('error', (error: NodeJS.ErrnoException) => {
      if (error.code === 'ENOENT') {
        clearTimeout(timer);
        reject(new AnvilMissingError(anvilMissingMessage()));
        return;
      }
      if (binary === process.env.AGENTCTL_ANVIL_PATH) {
        // EACCES (not executable, or a directory), ENOEXEC (not a program): never a checkpoint.
        clearTimeout(timer);
        child.kill('SIGKILL');
        reject(new AnvilMissingError(anvilPathMessage(binary, `cannot run it: ${error.code}`)));
        return;
      }
      fail(`cannot run anvil (${binary}): ${error.message}`);
    });
    const onEarlyExit = (code: number | null, signal: NodeJS.Signals | null) => {
      fail(`anvil exited before it was ready (${signal ?? `code ${code}`}): ${stderr.trim()}`);
    };
    child.once('exit', onEarlyExit);
    const lines = createInterface({ input: child.stdout as NodeJS.ReadableStream });
    lines.on('line', (line) => {
      const match = /Listening on (\S+)/.exec(line);
      if (!match) return;
      clearTimeout(timer);
      child.off('exit', onEarlyExit);
      lines.close();
      // Keep draining stdout so anvil never blocks on a full pipe.
      child.stdout?.resume();
      resolveUrl(`http://${match[1]}`);
    });
  });
}

/** Whether `binary --version` answers as anvil does ("anvil Version: …"), within a few seconds. */
function answersAsAnvil(binary: string): Promise<boolean> {
  return new Promise((resolve) => {
    execFile(
      binary,
      ['--version'],
      { timeout: 5_000, killSignal: 'SIGKILL', windowsHide: true },
      (error, stdout) => resolve(!error && /anvil/i.test(stdout)),
    );
  });
}

/** Whether `dir` records an anvil (a primary or a standby) of some serve. */
export function recordsAnvil(dir: string): boolean {
  return Object.values(PID_FILES).some((name) => existsSync(join(dir, name)));
}

/**
 * Stops the anvils recorded in `dir` (the primary and the standby) if the serve that started
 * them is gone (it was killed with kill -9), and any other anvil started for `dir`. Returns
 * false when that serve is still running.
 */
export function stopAbandonedAnvil(dir: string): boolean {
  const recorded = (['primary', 'standby'] as const).map((role) => readPidFile(dir, role));
  if (recorded.some(({ serve }) => serve !== undefined && isRunning(serve))) return false;
  for (const { anvil } of recorded) {
    if (anvil !== undefined && isAnvil(anvil) && startedFor(anvil, dir)) killQuietly(anvil);
  }
  for (const pid of anvilsStartedFor(dir)) killQuietly(pid);
  for (const name of Object.values(PID_FILES)) rmSync(join(dir, name), { force: true });
  return true;
}

/**
 * Stops every anvil started for `dir`: those its pid files name and any other. Call only while
 * holding the state dir's lock, which says its serve is gone (even one not yet reaped).
 */
export function stopAnvilsOf(dir: string): void {
  for (const role of ['primary', 'standby'] as const) stopRecordedAnvil(dir, role);
  for (const pid of anvilsStartedFor(dir)) killQuietly(pid);
}

function killQuietly(pid: number, signal: NodeJS.Signals = 'SIGKILL'): void {
  try {
    process.kill(pid, signal);
  } catch {
    // Already gone.
  }
}

/** Pids of running anvils whose environment names `dir` (Linux /proc; none elsewhere). */
export function anvilsStartedFor(dir: string): number[] {
  const marker = `${STATE_DIR_MARKER}=${dir}`;
  let entries: string[];
  try {
    entries = readdirSync('/proc');
  } catch {
    return [];
  }
  const found: number[] = [];
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (!readFileSync(`/proc/${entry}/cmdline`, 'utf8').includes('anvil')) continue;
      if (readFileSync(`/proc/${entry}/environ`, 'utf8').split('\0').includes(marker)) {
        found.push(Number(entry));
      }
    } catch {
      // Gone meanwhile, or another user's.
    }
  }
  return found;
}

/** Whether the anvil `pid` was started for `dir` (its environment says so; true without /proc). */
function startedFor(pid: number, dir: string): boolean {
  try {
    return readFileSync(`/proc/${pid}/environ`, 'utf8')
      .split('\0')
      .includes(`${STATE_DIR_MARKER}=${dir}`);
  } catch {
    return !existsSync('/proc/self');
  }
}

/** Only kill the pid if it still is an anvil: pids are reused. */
function isAnvil(pid: number): boolean {
  if (!isRunning(pid)) return false;
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('anvil');
  } catch {
    // No /proc (macOS): trust the pidfile, which only this state dir's serve writes.
    return true;
  }
}
