/**
 * What the bench's sections share: starting and stopping a serve, registering agents,
 * depositing, reading JSON, percentiles, and how a row is printed. run.ts and each section
 * that runs alone (`node bench/reads.ts`, `node bench/events.ts`) import it.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';

export const BIN = fileURLToPath(new URL('../bin/agentctl.js', import.meta.url));
export const ADMIN_TOKEN = 'bench-admin-token';
/** A serve as the bench measures it: rate limits off (a row that wants them says so). */
export const SERVE_ARGS = [
  BIN,
  'serve',
  '--port',
  '0',
  '--rate-limit',
  'off',
  '--log-level',
  'warn',
];
/** The same serve with the spec's default rate limits. */
export const RATE_LIMITED_SERVE_ARGS = [BIN, 'serve', '--port', '0', '--log-level', 'warn'];

export interface Sandbox {
  url: string;
  child: ChildProcess;
  keys: string[];
  agents: number;
  dir?: string;
}

/**
 * Starts a child that prints "listening on URL" and resolves with that URL (and, started with
 * --inspect, its DevTools WebSocket, whose notices are kept off the bench's output).
 */
export function startChild(
  args: string[],
): Promise<{ url: string; child: ChildProcess; inspector?: string }> {
  const child = spawn(process.execPath, args, {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, AGENTCTL_ADMIN_TOKEN: ADMIN_TOKEN },
  });
  let inspector: string | undefined;
  child.stderr?.on('data', (chunk: Buffer) => {
    for (const line of String(chunk).split('\n')) {
      const devtools = /^Debugger listening on (ws:\/\/\S+)/.exec(line);
      if (devtools) inspector = devtools[1];
      // serve's own shutdown notice is expected: the bench stops every sandbox it starts.
      else if (line && !/^(Debugger|For help, see)|^SIG\w+ received, shutting down$/.test(line)) {
        process.stderr.write(`${line}\n`);
      }
    }
  });
  return new Promise((resolve, reject) => {
    let out = '';
    child.stdout?.on('data', (chunk) => {
      out += chunk;
      const match = /listening on (http:\/\/\S+)/.exec(out);
      if (match?.[1]) resolve({ url: match[1], child, inspector });
    });
    child.on('exit', (code) => reject(new Error(`${args.join(' ')} exited with ${code}`)));
  });
}

export function stop(child: ChildProcess): Promise<void> {
  return new Promise((resolve) => {
    child.removeAllListeners('exit');
    child.once('exit', () => resolve());
    child.kill('SIGTERM');
  });
}

/** A new temporary directory for a `--state` sandbox of a section that runs alone. */
export function temporaryStateDir(): string {
  return join(mkdtempSync(join(tmpdir(), 'agentctl-bench-')), 'state');
}

export function percentile(sorted: number[], p: number): number {
  return (
    sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? Number.NaN
  );
}

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export async function registerOne(base: string): Promise<string> {
  const account = privateKeyToAccount(generatePrivateKey());
  const nonceResponse = await fetch(`${base}/api/v1/agent/auth/nonce?wallet=${account.address}`);
  const { nonce, message } = (await nonceResponse.json()) as { nonce: string; message: string };
  const response = await fetch(`${base}/api/v1/agent/auth/register`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      wallet_address: account.address,
      signature: await account.signMessage({ message }),
      nonce,
      agent_name: `Bench ${account.address.slice(2, 10)}`,
      operator_address: account.address,
    }),
  });
  if (response.status !== 200) throw new Error(`register answered ${response.status}`);
  return ((await response.json()) as { api_key: string }).api_key;
}

/** Registers until the sandbox holds `total` agents, `concurrency` at a time; the rate, end to end. */
export async function registerUpTo(sandbox: Sandbox, total: number, concurrency: number) {
  const count = total - sandbox.agents;
  let next = 0;
  const started = performance.now();
  const worker = async () => {
    while (next++ < count) sandbox.keys.push(await registerOne(sandbox.url));
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  const seconds = (performance.now() - started) / 1000;
  sandbox.agents = total;
  return { count, seconds, rate: count / seconds };
}

export async function post(base: string, apiKey: string, path: string, body: object) {
  const response = await fetch(`${base}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': apiKey },
    body: JSON.stringify(body),
  });
  if (response.status !== 200) {
    throw new Error(`${path} answered ${response.status}: ${await response.text()}`);
  }
}

export const deposit = (base: string, apiKey: string) =>
  post(base, apiKey, '/api/v1/agent/vault/deposit', { vault_id: 'moderate', amount_usdc: 1 });

export async function getJson(url: string, headers: Record<string, string> = {}) {
  const response = await fetch(url, { headers });
  if (response.status !== 200) throw new Error(`${url} answered ${response.status}`);
  // biome-ignore lint/suspicious/noExplicitAny: bench reads a few known fields
  return (await response.json()) as any;
}

/** The server-side wallet address of the agent holding `apiKey`. */
export async function agentAddress(base: string, apiKey: string): Promise<string> {
  return (await getJson(`${base}/api/v1/agent/wallet`, { 'x-api-key': apiKey }))
    .agent_address as string;
}

export const fmt = (n: number, digits = 1) => n.toFixed(digits).padStart(10);
export type Row = (name: string, ...cells: string[]) => void;
export const row: Row = (name, ...cells) => console.log(name.padEnd(58), ...cells);

/** A p99's label: how many samples it was taken from, when fewer than 1,000. */
export function fewSamples(samples: number): string {
  return samples < 1000 ? ` (p99 of ${samples})` : '';
}
