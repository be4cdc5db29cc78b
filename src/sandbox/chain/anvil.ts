import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { CHAIN_ID } from '../../api/schemas/index.ts';
import { StartupError } from '../errors.ts';
import { isRunning } from '../process.ts';

const PID_FILE = 'anvil.pid';
const READY_TIMEOUT_MS = 15_000;

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
      '0',
      '--chain-id',
      String(options.chainId ?? CHAIN_ID),
      // The sandbox funds its own accounts; anvil's well-known dev keys get nothing.
      '--accounts',
      '0',
      '--disable-console-log',
    ],
    // Its own process group: a Ctrl-C in the terminal reaches serve, which then stops
    // anvil after the work in flight, instead of killing the chain under it.
    { stdio: ['ignore', 'pipe', 'pipe'], detached: true },
  );
  const exited = new Promise<void>((resolveExit) => child.once('exit', () => resolveExit()));
  // Recorded before anything can go wrong, so a serve killed during start-up is cleaned up too:
  // the anvil's pid, then the pid of the serve that owns it.
  if (child.pid !== undefined) {
    writeFileSync(pidFile, `${child.pid} ${process.pid}\n`, { mode: 0o600 });
  }
  let rpcUrl: string;
  try {
    rpcUrl = await waitForListening(child, binary);
  } catch (error) {
    rmSync(pidFile, { force: true });
    throw error;
  }
  const pid = child.pid as number;
  return {
    rpcUrl,
    pid,
    running: () => child.exitCode === null && child.signalCode === null,
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
  if (!existsSync(pidFile)) return true;
  const [anvilPid, servePid] = readFileSync(pidFile, 'utf8').trim().split(/\s+/).map(Number);
  if (!ownerGone && servePid !== undefined && isRunning(servePid)) return false;
  if (anvilPid !== undefined && Number.isInteger(anvilPid) && anvilPid > 0 && isAnvil(anvilPid)) {
    try {
      process.kill(anvilPid, 'SIGKILL');
    } catch {
      // Already gone.
    }
  }
  rmSync(pidFile, { force: true });
  return true;
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
