import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { afterAll, beforeAll } from 'vitest';
import { type Context, contextFrom, type GlobalOptions } from '../../src/cli/context.ts';

/**
 * Scaffolding for unit tests of a command's run(): a context whose stdout and stderr are
 * captured as text, and a real node:http server on 127.0.0.1 (port 0) answering canned bodies.
 */

/**
 * A context for run() built from plain values, its stdout and stderr kept as text (colour off
 * unless `globals` says otherwise). `text` fills in as the command writes.
 *
 * @example
 * const { context, text } = capturedContext({ baseUrl: url }, { AGENTCTL_CONFIG_DIR: dir });
 * await run({}, context);
 * expect(text.stdout).toContain('…');
 */
export function capturedContext(globals: GlobalOptions, env: NodeJS.ProcessEnv) {
  const text = { stdout: '', stderr: '' };
  const sink = (name: 'stdout' | 'stderr') =>
    new Writable({
      write(chunk, _encoding, done) {
        text[name] += chunk;
        done();
      },
    });
  const context = contextFrom({ color: false, ...globals }, env, {
    stdout: sink('stdout'),
    stderr: sink('stderr'),
  });
  return { context, text };
}

/**
 * Runs one command's run() on a captured context (closed afterwards, however run() ends);
 * what it wrote.
 */
export async function runCaptured<O>(
  command: (options: O, context: Context) => Promise<void>,
  options: O,
  globals: GlobalOptions,
  env: NodeJS.ProcessEnv,
): Promise<{ stdout: string; stderr: string }> {
  const { context, text } = capturedContext(globals, env);
  try {
    await command(options, context);
  } finally {
    await context.close();
  }
  return text;
}

/** One request the canned server received (recorded before it is answered). */
export interface Recorded {
  method: string;
  url: URL;
  headers: IncomingHttpHeaders;
  body: string;
}

/**
 * A canned answer: `body` is sent as JSON (content-type application/json), `text` as it is with
 * only the headers given. The status is 200 unless said.
 */
export interface Canned {
  status?: number;
  body?: unknown;
  text?: string;
  headers?: Record<string, string>;
}

export type Answer = Canned | ((request: Recorded) => Canned);

/** Answers by "METHOD /path" (the query is not part of the key), or one function for all. */
export type Routes = Record<string, Answer> | ((request: Recorded) => Canned);

export interface CannedServer {
  url: string;
  /** Every request received, oldest first; tests may empty it (`requests.length = 0`). */
  requests: Recorded[];
  /** Drops open connections and stops listening. */
  close(): Promise<void>;
}

/** Routes answering 200 with each body as JSON, keyed by "METHOD /path" (`method` + the key). */
export const jsonBodies = (bodies: Record<string, unknown>, method = '') =>
  Object.fromEntries(
    Object.entries(bodies).map(([route, body]) => [`${method}${route}`, { body }]),
  ) as Record<string, Canned>;

/** The X-Sandbox-Time header every sandbox answer carries (the sandbox's clock). */
export const sandboxTime = (unixSeconds: number) => ({ 'x-sandbox-time': String(unixSeconds) });

/**
 * A service on 127.0.0.1 (port 0) answering canned bodies; `headers` go on every answer (an
 * answer's own headers win). A route it does not know is a 404 with an error body.
 *
 * @example
 * const server = await cannedServer({ 'GET /v1/vaults': { body: { vaults: [] } } }, sandboxTime(NOW));
 * // …
 * await server.close();
 */
export async function cannedServer(
  routes: Routes,
  headers: Record<string, string> = {},
): Promise<CannedServer> {
  const requests: Recorded[] = [];
  const http = createServer(async (request, response) => {
    let body = '';
    for await (const chunk of request) body += chunk;
    const recorded: Recorded = {
      method: request.method ?? 'GET',
      url: new URL(request.url ?? '/', 'http://localhost'),
      headers: request.headers,
      body,
    };
    requests.push(recorded);
    const key = `${recorded.method} ${recorded.url.pathname}`;
    const answer =
      typeof routes === 'function'
        ? routes
        : (routes[key] ?? {
            status: 404,
            body: { error: { code: 'NOT_FOUND', message: `no answer for ${key}`, details: {} } },
          });
    const canned = typeof answer === 'function' ? answer(recorded) : answer;
    const json = canned.text === undefined;
    response.writeHead(canned.status ?? 200, {
      ...(json && { 'content-type': 'application/json' }),
      ...headers,
      ...canned.headers,
    });
    response.end(json ? JSON.stringify(canned.body) : canned.text);
  });
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(http.address() as AddressInfo).port}`,
    requests,
    async close() {
      http.closeAllConnections();
      await new Promise((resolve) => http.close(resolve));
    },
  };
}

/**
 * A canned server for a whole test file: started before its tests, closed after them. Read
 * `url` and `requests` inside tests and hooks (they exist once it has started).
 */
export function useCannedServer(routes: Routes, headers?: Record<string, string>): CannedServer {
  let server: CannedServer | undefined;
  beforeAll(async () => {
    server = await cannedServer(routes, headers);
  });
  afterAll(async () => {
    await server?.close();
  });
  const started = () => {
    if (!server) throw new Error('the canned server starts in beforeAll');
    return server;
  };
  return {
    get url() {
      return started().url;
    },
    get requests() {
      return started().requests;
    },
    close: () => started().close(),
  };
}
