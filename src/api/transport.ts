/**
 * One HTTP exchange for the command line, on Node's own `http`/`https`.
 *
 * Why not undici or `fetch`: a command such as `agentctl --json vaults` makes one request and
 * exits, so what it loads is most of its run time. A script making one GET to a local service,
 * bundled as the CLI is, measured on Node 24 (2 cores, `node -e 0` 36 ms): 132 ms with undici's
 * `request`, 108 ms with the built-in `fetch` (it loads Node's internal copy of undici),
 * 95 ms with `http` taken by an ES import, and 60 ms with `http` taken by require(). The
 * sandbox, a long-running server, keeps undici.
 *
 * The ES import is slow because building a built-in's namespace reads every export, and
 * `http.WebSocket` is a lazy getter that loads undici.
 */
import type { Agent as HttpAgent, IncomingHttpHeaders } from 'node:http';
import { createRequire } from 'node:module';
import type { Writable } from 'node:stream';

const require = createRequire(import.meta.url);

export interface Exchange {
  status: number;
  headers: IncomingHttpHeaders;
  text: string;
}

export interface ExchangeOptions {
  method: string;
  headers: Record<string, string>;
  body?: string;
  /** Connecting, then the headers and the whole body. */
  timeoutMs: number;
  /** Connecting only (TCP and TLS). */
  connectTimeoutMs: number;
  /**
   * Where a 2xx answer's body goes instead of `text` (which is then empty): a file being
   * downloaded, say. Opened once per answer, so a retry starts on a new one; never held in
   * memory, so MAX_RESPONSE_BYTES does not apply. An error answer is read as text as usual.
   */
  download?: () => Writable;
  /**
   * Sent on a connection of its own, never a kept-alive one, and so never sent again after a
   * reset: for a write that a resend could carry out twice (one to a service not known to
   * honour Idempotency-Key). A kept-alive connection can be reset after the service read it.
   */
  newConnection?: boolean;
}

/** Refused before reading more: no answer of the service comes near this. */
const MAX_RESPONSE_BYTES = 64 * 1024 * 1024;

/** The codes a failed exchange throws with, besides the system's (ECONNREFUSED, …). */
export const TIMED_OUT_CONNECTING = 'AGENTCTL_CONNECT_TIMEOUT';
export const TIMED_OUT_ANSWERING = 'AGENTCTL_ANSWER_TIMEOUT';
export const ANSWER_TOO_LARGE = 'AGENTCTL_ANSWER_TOO_LARGE';
/** A download's sink failed (its `cause`): a local error, not the service's. */
export const DOWNLOAD_FAILED = 'AGENTCTL_DOWNLOAD_FAILED';

/** Failures that say a request never reached the service: nothing was connected. */
const NOT_SENT = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', TIMED_OUT_CONNECTING]);

export interface Transport {
  exchange(url: string, options: ExchangeOptions): Promise<Exchange>;
  close(): void;
}

/** Connections are kept alive between the requests of one command, and closed with it. */
export function createTransport(): Transport {
  const agents = new Map<string, HttpAgent>();
  function agentFor(protocol: string): HttpAgent {
    let agent = agents.get(protocol);
    if (!agent) {
      const module: typeof import('node:https') =
        protocol === 'https:' ? require('node:https') : require('node:http');
      agent = new module.Agent({ keepAlive: true, maxSockets: 8 });
      agents.set(protocol, agent);
    }
    return agent;
  }

  /**
   * One try. A kept-alive connection the server closed while idle fails at once with a reset
   * and no answer; the request most likely never reached the service then, so it is sent once
   * more on a new connection (what Node's documentation advises). A write that must not be
   * sent twice asks for `newConnection`, and is never sent again here.
   */
  function send(url: URL, options: ExchangeOptions, deadline: number, fresh: boolean) {
    const http: typeof import('node:https') =
      url.protocol === 'https:' ? require('node:https') : require('node:http');
    const stream: typeof import('node:stream') = require('node:stream');
    return new Promise<Exchange>((resolve, reject) => {
      // The first failure is the one reported: destroying a request makes its response
      // fail too, with a less telling "aborted".
      let failure: Error | undefined;
      let connected = false;
      let answered = false;
      const fail = (code: string, message: string) => {
        failure ??= Object.assign(new Error(message), { code });
        request.destroy(failure);
      };
      const request = http.request(url, {
        method: options.method,
        headers: {
          ...options.headers,
          ...(options.body !== undefined && {
            'content-length': String(Buffer.byteLength(options.body)),
          }),
        },
        agent: options.newConnection ? false : agentFor(url.protocol),
      });
      const answerTimer = setTimeout(
        () =>
          connected
            ? fail(TIMED_OUT_ANSWERING, 'timed out waiting for an answer')
            : fail(TIMED_OUT_CONNECTING, 'timed out connecting'),
        Math.max(1, deadline - Date.now()),
      );
      const settle = (error: Error | undefined, exchange?: Exchange) => {
        clearTimeout(answerTimer);
        if (exchange && !error) return resolve(exchange);
        const code = (error as NodeJS.ErrnoException | undefined)?.code;
        const resendable = !fresh && !options.newConnection && request.reusedSocket;
        if (!failure && !answered && resendable && code === 'ECONNRESET') {
          // Should the resend not reach the service (refused: it was killed), the first send
          // may still have: its reset is the failure said, not the refusal.
          return resolve(
            send(url, options, deadline, true).catch((resent: NodeJS.ErrnoException) => {
              throw NOT_SENT.has(resent.code ?? '') ? error : resent;
            }),
          );
        }
        reject(failure ?? error);
      };
      request.on('socket', (socket) => {
        // A kept-alive socket is connected already; a new one gets its own deadline.
        if (!socket.connecting) {
          connected = true;
          return;
        }
        const connectTimer = setTimeout(
          () => fail(TIMED_OUT_CONNECTING, 'timed out connecting'),
          options.connectTimeoutMs,
        );
        socket.once(url.protocol === 'https:' ? 'secureConnect' : 'connect', () => {
          connected = true;
          clearTimeout(connectTimer);
        });
        socket.once('close', () => clearTimeout(connectTimer));
      });
      request.on('error', (error) => settle(error));
      request.on('response', (response) => {
        answered = true;
        const status = response.statusCode ?? 0;
        if (options.download && status >= 200 && status < 300) {
          const sink = options.download();
          // Which side failed first: the sink's own failure (a full disk) is not the
          // service's; it is handed over as DOWNLOAD_FAILED with its cause.
          let first: 'response' | 'sink' | undefined;
          response.once('error', () => {
            first ??= 'response';
          });
          sink.once('error', () => {
            first ??= 'sink';
          });
          stream.pipeline(response, sink, (error) => {
            if (!error) return settle(undefined, { status, headers: response.headers, text: '' });
            if (first === 'sink' && !failure) {
              return settle(
                Object.assign(new Error(error.message), { code: DOWNLOAD_FAILED, cause: error }),
              );
            }
            // A body cut short: the connection went away.
            settle(Object.assign(new Error('the connection was closed'), { code: 'ECONNRESET' }));
          });
          return;
        }
        const chunks: Buffer[] = [];
        let size = 0;
        response.on('data', (chunk: Buffer) => {
          size += chunk.length;
          if (size > MAX_RESPONSE_BYTES) {
            fail(ANSWER_TOO_LARGE, `the answer is larger than ${MAX_RESPONSE_BYTES} bytes`);
            return;
          }
          chunks.push(chunk);
        });
        response.on('error', (error) => settle(error));
        response.on('end', () =>
          settle(undefined, {
            status,
            headers: response.headers,
            // A byte-order mark is not part of the JSON.
            text: Buffer.concat(chunks)
              .toString('utf8')
              .replace(/^\uFEFF/, ''),
          }),
        );
        // Closed before its end without an error event: the connection went away.
        response.on('close', () => {
          if (!response.complete)
            settle(Object.assign(new Error('the connection was closed'), { code: 'ECONNRESET' }));
        });
      });
      request.end(options.body);
    });
  }

  return {
    exchange: (url, options) => send(new URL(url), options, Date.now() + options.timeoutMs, false),
    close() {
      for (const agent of agents.values()) agent.destroy();
      agents.clear();
    },
  };
}
