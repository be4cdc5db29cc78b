import { spawn } from 'node:child_process';
import { BIN } from './serve.ts';

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * Runs the built `agentctl` with no TTY (stdin closed), as a CI job would. `env` is added to
 * a clean environment: no AGENTCTL_* variables leak in from the developer's shell.
 */
export async function runCli(args: string[], env: NodeJS.ProcessEnv = {}): Promise<CliResult> {
  const run = spawnCli(args, env);
  const code = await run.exited;
  return { code, stdout: run.stdout(), stderr: run.stderr() };
}

/**
 * The built `agentctl` in the background (for `watch` and other commands that run until
 * stopped), in the same clean environment as runCli(): its output so far, and its exit.
 */
export function spawnCli(args: string[], env: NodeJS.ProcessEnv = {}) {
  const base = Object.fromEntries(
    Object.entries(process.env).filter(
      ([key]) => !key.startsWith('AGENTCTL_') && key !== 'FORCE_COLOR',
    ),
  );
  const child = spawn(process.execPath, [BIN, ...args], {
    env: { ...base, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk) => {
    stdout += chunk;
  });
  child.stderr.on('data', (chunk) => {
    stderr += chunk;
  });
  const exited = new Promise<number | null>((resolve) =>
    child.on('close', (code) => resolve(code)),
  );
  return { child, stdout: () => stdout, stderr: () => stderr, exited };
}
