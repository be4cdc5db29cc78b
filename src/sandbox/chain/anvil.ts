import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { CHAIN_ID } from '../../api/schemas/index.ts';
import { StartupError } from '../errors.ts';
import { isRunning } from '../process.ts';

const PID_FILE = 'anvil.pid';
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
 * Where the anvil binary is: `AGENTCTL_ANVIL_PATH`, else the npm package
 * `@foundry-rs/anvil-<platform>-<arch>` (the binary package that `@foundry-rs/anvil`
 * itself installs), else `anvil` on PATH (a Foundry install).
 */
export function resolveAnvilBinary(env: NodeJS.ProcessEnv = process.env): string {
  if (env.AGENTCTL_ANVIL_PATH) return env.AGENTCTL_ANVIL_PATH;
  const arch = process.arch === 'x64' ? 'amd64' : process.arch;
  const binary = process.platform === 'win32' ? 'anvil.exe' : 'anvil';
  const require = createRequire(import.meta.url);
  try {
    const manifest = require.resolve(`@foundry-rs/anvil-${process.platform}-${arch}/package.json`);
    const path = join(manifest, '..', 'bin', binary);
    if (existsSync(path)) return path;
  } catch {
    // Not installed for this platform: fall back to PATH.
  }
  return binary;
}

export interface AnvilProcess {
  rpcUrl: string;
  pid: number;
  /** False once anvil has exited, for whatever reason. */
  running(): boolean;
  /** Resolves when anvil exits, for whatever reason. */
  exited: Promise<void>;
  /** Stops anvil and removes its pidfile. */
  stop(): Promise<void>;
}

/**
 * Starts anvil on a free loopback port and waits until it listens. Its pid goes into
 * `<stateDir>/anvil.pid`; a pid left there by a `serve` that was killed is stopped first,
 * so no anvil outlives the sandbox that started it by more than one restart.
 */
export async function startAnvil(options: {
  stateDir: string;
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
  const pidFile = join(options.stateDir, PID_FILE);
  // This state dir is locked by us, so whatever serve started that anvil is gone.
  stopAbandonedAnvil(options.stateDir, { ownerGone: true });
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
      env: { ...process.env, [STATE_DIR_MARKER]: options.stateDir },
    },
  );
  const exited = new Promise<void>((resolveExit) => child.once('exit', () => resolveExit()));
  // Recorded before anything can go wrong, so a serve killed during start-up is cleaned up too:
  // the anvil's pid, then the pid of the serve that owns it.
  if (child.pid !== undefined) writePidFile(options.stateDir, child.pid);
  let rpcUrl: string;
  try {
    rpcUrl = await waitForListening(child, binary);
  } catch (error) {
    rmSync(pidFile, { force: true });
    throw error;
  }
  const pid = child.pid as number;
  // With its port, so that a serve started after a kill -9 of this one can take it over.
  writePidFile(options.stateDir, pid, Number(new URL(rpcUrl).port));
  return {
    rpcUrl,
    pid,
    running: () => child.exitCode === null && child.signalCode === null,
    exited,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGTERM');
        const timer = setTimeout(() => child.kill('SIGKILL'), 3000);
        await exited;
        clearTimeout(timer);
      }
      rmSync(pidFile, { force: true });
    },
  };
}

/** anvil.pid: the anvil's pid, the pid of the serve that owns it, and its port once known. */
function writePidFile(stateDir: string, anvilPid: number, port?: number): void {
  writeFileSync(
    join(stateDir, PID_FILE),
    `${anvilPid} ${process.pid}${port === undefined ? '' : ` ${port}`}\n`,
    { mode: 0o600 },
  );
}

function readPidFile(stateDir: string): { anvil?: number; serve?: number; port?: number } {
  const [anvil, serve, port] = readFileSync(join(stateDir, PID_FILE), 'utf8')
    .trim()
    .split(/\s+/)
    .map(Number);
  const valid = (n: number | undefined) =>
    n !== undefined && Number.isInteger(n) && n > 0 ? n : undefined;
  return { anvil: valid(anvil), serve: valid(serve), port: valid(port) };
}

/**
 * The anvil a serve of this state dir left running when it was killed (kill -9), which the
 * next serve takes over rather than rebuilding its chain: its pid and port. Undefined when
 * there is none, or its serve still runs. Call only while holding the state dir's lock.
 */
export function survivingAnvil(stateDir: string): { pid: number; port: number } | undefined {
  if (!existsSync(join(stateDir, PID_FILE))) return undefined;
  const found = readPidFile(stateDir);
  if (found.anvil === undefined || found.port === undefined) return undefined;
  if (found.serve !== undefined && found.serve !== process.pid && isRunning(found.serve)) {
    return undefined;
  }
  return isAnvil(found.anvil) && startedFor(found.anvil, stateDir)
    ? { pid: found.anvil, port: found.port }
    : undefined;
}

/** How often a taken-over anvil, not our child, is checked to be still running. */
const ADOPTED_CHECK_MS = 100;

/**
 * An anvil found running by `survivingAnvil`, as this serve's own: anvil.pid names this serve
 * from now on, and its end is noticed by looking at its pid (it is not our child).
 */
export function adoptAnvil(stateDir: string, found: { pid: number; port: number }): AnvilProcess {
  writePidFile(stateDir, found.pid, found.port);
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
  return {
    rpcUrl: `http://127.0.0.1:${found.port}`,
    pid: found.pid,
    running: alive,
    exited,
    async stop() {
      if (alive()) {
        killQuietly(found.pid, 'SIGTERM');
        for (let waited = 0; alive() && waited < 3000; waited += 20) {
          await new Promise((resolve) => setTimeout(resolve, 20));
        }
        if (alive()) killQuietly(found.pid);
      }
      clearInterval(timer);
      rmSync(join(stateDir, PID_FILE), { force: true });
    },
  };
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
      fail(
        error.code === 'ENOENT'
          ? `cannot run anvil (${binary}): install the optional dependency @foundry-rs/anvil-<platform>, ` +
              'put Foundry’s anvil on PATH, set AGENTCTL_ANVIL_PATH, or use --rpc-url'
          : `cannot run anvil (${binary}): ${error.message}`,
      );
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

/**
 * Stops the anvil recorded in `<dir>/anvil.pid` if the serve that started it is gone
 * (it was killed with kill -9). Returns false when that serve is still running.
 */
export function stopAbandonedAnvil(dir: string, { ownerGone = false } = {}): boolean {
  const pidFile = join(dir, PID_FILE);
  if (!existsSync(pidFile)) {
    // anvil.pid was lost: look for an anvil started for this dir. Only a serve that holds
    // the dir's lock (ownerGone) may do that, since a running serve's anvil looks the same.
    if (ownerGone) for (const pid of anvilsStartedFor(dir)) killQuietly(pid);
    return true;
  }
  const { anvil: anvilPid, serve: servePid } = readPidFile(dir);
  if (!ownerGone && servePid !== undefined && isRunning(servePid)) return false;
  if (anvilPid !== undefined && isAnvil(anvilPid)) killQuietly(anvilPid);
  if (ownerGone) for (const pid of anvilsStartedFor(dir)) killQuietly(pid);
  rmSync(pidFile, { force: true });
  return true;
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
