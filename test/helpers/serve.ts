import { type ChildProcess, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

export const BIN = fileURLToPath(new URL('../../bin/agentctl.js', import.meta.url));

export interface ServeProcess {
  url: string;
  child: ChildProcess;
  stdout(): string;
  stderr(): string;
  /** Resolves with the exit code (or signal name) once the process has ended. */
  exited: Promise<number | string>;
}

/** Runs the built `agentctl serve` and waits for its ready line. */
export function startServe(args: string[], env: NodeJS.ProcessEnv = {}): Promise<ServeProcess> {
  const child = spawn(process.execPath, [BIN, 'serve', '--port', '0', ...args], {
    env: { ...process.env, AGENTCTL_ADMIN_TOKEN: undefined, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout?.on('data', (chunk) => {
    out += chunk;
  });
  child.stderr?.on('data', (chunk) => {
    err += chunk;
  });
  const exited = new Promise<number | string>((resolve) => {
    child.on('exit', (code, signal) => resolve(code ?? signal ?? 'unknown'));
  });
  return new Promise((resolve, reject) => {
    const onData = () => {
      const match = /listening on (http:\/\/\S+)/.exec(out);
      if (match?.[1]) {
        child.stdout?.off('data', onData);
        resolve({ url: match[1], child, stdout: () => out, stderr: () => err, exited });
      }
    };
    child.stdout?.on('data', onData);
    exited.then((code) =>
      reject(new Error(`serve exited (${code}) before it was ready:\n${out}\n${err}`)),
    );
  });
}

/** Runs `agentctl serve` expecting it to fail at start; returns its exit code and output. */
export function serveFailure(args: string[]): Promise<{ code: number | null; stderr: string }> {
  const child = spawn(process.execPath, [BIN, 'serve', ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let err = '';
  child.stderr?.on('data', (chunk) => {
    err += chunk;
  });
  return new Promise((resolve) => child.on('exit', (code) => resolve({ code, stderr: err })));
}
