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
export function runCli(args: string[], env: NodeJS.ProcessEnv = {}): Promise<CliResult> {
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
  return new Promise((resolve) => child.on('close', (code) => resolve({ code, stdout, stderr })));
}
