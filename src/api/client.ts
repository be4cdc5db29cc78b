import type { Writable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import type { z } from 'zod';
import {
  ApiError,
  NOT_JSON_ANSWER,
  OutcomeUnknownError,
  UnexpectedResponseError,
  UnreachableError,
} from './errors.ts';
import {
  backoff,
  decideAfterWrite,
  newIdempotencyKey,
  originOf,
  WRITE_ATTEMPTS,
  type WriteTry,
} from './idempotency.ts';
import type { ErrorBody, RegisterResponse, SnapshotRequest } from './schemas/index.ts';
import {
  ANSWER_TOO_LARGE,
  createTransport,
  DOWNLOAD_FAILED,
  TIMED_OUT_ANSWERING,
  TIMED_OUT_CONNECTING,
} from './transport.ts';

export interface ApiClientOptions {
  baseUrl: string;
  /** Looked up only when an authenticated request is made (it may read the profile). */
  apiKey?: () => Promise<string | undefined>;
  userAgent: string;
  /** Per attempt: connecting, then waiting for headers and body. */
  timeoutMs?: number;
  /** All attempts of one GET together, retries and waits included. */
  retryBudgetMs?: number;
  /** Each try of a write (retried only against a service that honours Idempotency-Key). */
  writeTimeoutMs?: number;
  /**
   * The Idempotency-Key of the next write, made once before its first try and sent on every
   * try, and the key a user would pass again to finish it (see OutcomeUnknownError). Default:
   * a fresh UUID v4 for each write.
   */
  idempotencyKey?: () => WriteKey;
  /**
   * Which services honour Idempotency-Key, by origin (scheme://host:port): `honours` is asked
   * when a write is sent (for its connection) and when it fails, `learned` is told once an answer to a keyed write carried
   * Idempotent-Replayed. Without it, a service is trusted only once this client has seen that.
   */
  keyHonouring?: {
    honours(origin: string): Promise<boolean>;
    learned(origin: string): Promise<void>;
    /**
     * Told when a keyed write here was answered 2xx without Idempotent-Replayed: the service
     * did it and ignores keys (another service on a remembered origin, say).
     */
    forgot?(origin: string): Promise<void>;
  };
  /** Called after each attempt that got an answer (for --verbose). */
  onExchange?: (method: string, url: string, status: number, ms: number) => void;
  /** Called before each retry (the CLI says so on stderr); `write` for a keyed write's. */
  onRetry?: (reason: string, waitMs: number, write?: WriteRetry) => void;
}

/** A write's Idempotency-Key, and the key a user gives again to finish it (a seed run's base). */
export interface WriteKey {
  key: string;
  rerunKey: string;
}

/** Which write is tried again, and which try comes next (2 of 4, …). */
export interface WriteRetry {
  method: string;
  path: string;
  attempt: number;
  of: number;
}

/** A write's answer: `parsed` is set when the body matches the contract. */
export interface WriteResponse<T> extends ApiResponse {
  parsed: T | undefined;
}

/** One answer: the body exactly as received, and parsed JSON. */
export interface ApiResponse<T = unknown> {
  status: number;
  text: string;
  data: T;
}

/**
 * The shared schemas, loaded on first use: zod is the largest part of a command's start-up,
 * and a command that prints the body as received (--json) never needs it.
 */
type Schemas = typeof import('./schemas/index.ts');
const schemas = (): Promise<Schemas> => import('./schemas/index.ts');

/** Picks an endpoint's answer schema; `null` for shapes the spec leaves open (any JSON). */
type ShapeOf<S extends z.ZodType> = ((schemas: Schemas) => S) | null;

/**
 * A read. Called, it checks the answer against the contract; `.asReceived()` makes the same
 * request (same retries and timeouts) and checks only that the answer is JSON, for --json,
 * which prints the service's body as it was sent.
 */
export interface Read<A extends unknown[], T> {
  (...args: A): Promise<ApiResponse<T>>;
  asReceived(...args: A): Promise<ApiResponse<unknown>>;
}

/** One request to an endpoint. */
interface Request {
  method: 'GET' | 'POST';
  path: string;
  body?: unknown;
  auth?: boolean;
  headers?: Record<string, string>;
}

const RETRYABLE_STATUSES = new Set([429, 502, 503, 504]);
const DEFAULT_TIMEOUT_MS = 15_000;
const CONNECT_TIMEOUT_MS = 5_000;
const DEFAULT_RETRY_BUDGET_MS = 10_000;
const DEFAULT_WRITE_TIMEOUT_MS = 120_000;
const MIN_RETRY_WAIT_MS = 100;

/**
 * The service's HTTP client: one typed method per endpoint, responses parsed with the
 * shared schemas (unknown fields pass through in `text`).
 *
 * GETs are retried with exponential backoff and full jitter on 429 (honouring Retry-After),
 * 502, 503 and 504, and on transient connection errors (reset, timed out connecting, DNS not
 * answering), within one overall budget; a refused connection or an unknown host fails at
 * once.
 *
 * A write carries an Idempotency-Key, made before its first try. It is tried again (same key,
 * up to WRITE_ATTEMPTS tries, see decideAfterWrite) only against a service that has shown it
 * honours keys: an answer to a keyed write carried Idempotent-Replayed. Elsewhere it is tried
 * once, since a service that ignores the key would carry it out twice. A write whose outcome
 * is still unknown at the end throws OutcomeUnknownError with its key. Other POSTs (reads such
 * as /api/v1/positions, GraphQL, `agentctl api`) are never retried.
 */
export function createApiClient(options: ApiClientOptions) {
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const budgetMs = options.retryBudgetMs ?? DEFAULT_RETRY_BUDGET_MS;
  const writeTimeoutMs = options.writeTimeoutMs ?? DEFAULT_WRITE_TIMEOUT_MS;
  const transport = createTransport();
  const base = options.baseUrl.replace(/\/+$/, '');
  /** The sandbox's clock as its last answer gave it (X-Sandbox-Time), and when that was. */
  let sandboxTime: { seconds: number; seenAtMs: number } | undefined;
  /**
   * Set by close(): a request still under way (one given up on by Ctrl-C, say) fails with the
   * connections it loses, and is not tried again.
   */
  let closed = false;
  const origin = originOf(base);
  const nextWriteKey = (): WriteKey => (options.idempotencyKey ?? freshKey)();
  /** Set once an answer to a keyed write here carried Idempotent-Replayed. */
  let honouringSeen = false;
  /** Set once a keyed write here was done (2xx) without it: this service ignores keys. */
  let ignoringSeen = false;
  const honoursKeys = async () =>
    !ignoringSeen &&
    (honouringSeen || ((await options.keyHonouring?.honours(origin).catch(() => false)) ?? false));
  async function sawIgnoring(): Promise<void> {
    if (ignoringSeen) return;
    ignoringSeen = true;
    const hooks = options.keyHonouring;
    if (hooks?.forgot && (await hooks.honours(origin).catch(() => false))) {
      await hooks.forgot(origin).catch(() => undefined);
    }
  }
  async function sawHonouring(): Promise<void> {
    if (honouringSeen || ignoringSeen) return;
    honouringSeen = true;
    const hooks = options.keyHonouring;
    // Remembered for later commands; a configuration that cannot be written only costs retries.
    if (hooks && !(await hooks.honours(origin).catch(() => true))) {
      await hooks.learned(origin).catch(() => undefined);
    }
  }

  async function send(
    method: string,
    path: string,
    init: {
      body?: unknown;
      auth?: boolean;
      headers?: Record<string, string>;
      json?: boolean;
      /** A GraphQL response is an answer whatever its status (its errors say what failed). */
      graphql?: boolean;
      /** A 2xx body goes there, not to `text` (see ExchangeOptions.download). */
      download?: () => Writable;
      /** A write that changes something: it carries an Idempotency-Key (see above). */
      keyed?: boolean;
      /** A request that may change something the client cannot tell (`agentctl api`). */
      mayWrite?: boolean;
      /** A keyed write's key, taken beforehand with nextWriteKey(); else the next one. */
      writeKey?: WriteKey;
    },
  ): Promise<ApiResponse> {
    const url = `${base}${path}`;
    const headers: Record<string, string> = {
      'user-agent': options.userAgent,
      accept: 'application/json',
    };
    const apiKey = init.auth ? await options.apiKey?.() : undefined;
    if (apiKey) headers['x-api-key'] = apiKey;
    if (init.body !== undefined) headers['content-type'] = 'application/json';
    Object.assign(headers, init.headers);
    const retries = method === 'GET';
    const key = init.keyed ? (init.writeKey ?? nextWriteKey()) : undefined;
    if (key) headers['idempotency-key'] = key.key;
    const write = `${method} ${path.split('?')[0]}`;
    /** Why an earlier try of this write may have run (its answer lost, a 5xx), if one may have. */
    let mayHaveRun: string | undefined;
    /**
     * A keyed write's try that did not succeed: tried again, or the error it ends with. `kept`:
     * the answer carried Idempotent-Replayed, so it is what the key's write did.
     */
    const afterWrite = async (
      attempt: number,
      tried: WriteTry,
      reason: string,
      error: Error,
      answer?: { status: number; body: ErrorBody },
      kept = false,
    ): Promise<void> => {
      const honoured = await honoursKeys();
      const decision = decideAfterWrite(tried, attempt, honoured);
      // Once a try may have run, only a kept answer says what happened: a later try refused
      // before the key was looked up (a rate limit, a refused connection) says nothing of it.
      const earlier = kept ? undefined : mayHaveRun;
      if (decision.unknown) mayHaveRun ??= reason;
      if (decision.retry && !closed) {
        options.onRetry?.(reason, decision.waitMs, {
          method,
          path: path.split('?')[0] as string,
          attempt: attempt + 2,
          of: WRITE_ATTEMPTS,
        });
        await sleep(decision.waitMs);
        deadline = Date.now() + writeTimeoutMs;
        return;
      }
      // At the end (or given up on by close()): unknown if this try or an earlier may have run.
      if ((decision.unknown || earlier !== undefined) && key) {
        throw new OutcomeUnknownError({
          write,
          idempotencyKey: key.key,
          rerunKey: key.rerunKey,
          reason: decision.unknown || earlier === undefined ? reason : `${earlier}, then ${reason}`,
          tries: attempt + 1,
          honoured,
          ...answer,
        });
      }
      throw error;
    };
    // A GET's attempts, waits included, share the budget; each try of a write gets the whole
    // write timeout, since confirming transactions on a public chain takes a while.
    let deadline = Date.now() + (retries ? budgetMs : writeTimeoutMs);
    for (let attempt = 0; ; attempt++) {
      if (closed) throw new UnreachableError(base, 'the client was closed');
      let status: number;
      let text: string;
      let retryAfterMs: number | undefined;
      /** The answer is a keyed write's stored outcome (it says Idempotent-Replayed). */
      let keptAnswer = false;
      try {
        const started = performance.now();
        // A write that a resend could carry out twice (a keyed one to a service not known to
        // honour keys, or any other but a GET through `agentctl api`) goes on a new connection.
        const once = method !== 'GET' && (key ? !(await honoursKeys()) : Boolean(init.mayWrite));
        const answer = await transport.exchange(url, {
          method,
          headers,
          ...(once && { newConnection: true }),
          // One deadline covers connecting, the headers and the whole body: each try of a
          // GET gets timeoutMs (within the budget), each try of a write the write timeout.
          timeoutMs: Math.max(
            1,
            retries ? Math.min(timeoutMs, deadline - Date.now()) : deadline - Date.now(),
          ),
          connectTimeoutMs: Math.min(timeoutMs, CONNECT_TIMEOUT_MS),
          ...(init.body !== undefined ? { body: JSON.stringify(init.body) } : {}),
          ...(init.download && { download: init.download }),
        });
        status = answer.status;
        text = answer.text;
        keptAnswer = Boolean(key) && answer.headers['idempotent-replayed'] !== undefined;
        if (keptAnswer) await sawHonouring();
        // Every keyed write of a service that honours keys says Idempotent-Replayed when done.
        else if (key && status >= 200 && status < 300) await sawIgnoring();
        options.onExchange?.(method, url, status, Math.round(performance.now() - started));
        retryAfterMs = parseRetryAfter(answer.headers['retry-after']);
        const stamped = Number(answer.headers['x-sandbox-time']);
        if (Number.isSafeInteger(stamped)) sandboxTime = { seconds: stamped, seenAtMs: Date.now() };
      } catch (error) {
        // A download's own file failed: the caller's error, said as its own.
        if ((error as NodeJS.ErrnoException).code === DOWNLOAD_FAILED) {
          throw (error as Error).cause;
        }
        const reason = networkReason(error);
        if (key) {
          const tried = writeTry(error);
          if (!tried) throw new UnreachableError(base, reason.text);
          // The system's ETIMEDOUT is said as a connect timeout, but may come later.
          const lost =
            (error as NodeJS.ErrnoException).code === 'ETIMEDOUT'
              ? 'the connection timed out'
              : reason.text;
          await afterWrite(
            attempt,
            tried,
            tried.kind === 'lost' ? `${lost} after it was sent` : reason.text,
            new UnreachableError(base, reason.text),
          );
          continue;
        }
        if (!retries && reason.timedOut) {
          throw new UnreachableError(
            base,
            `${reason.text}; the ${method} may still have taken effect: check before retrying`,
          );
        }
        const wait = backoff(attempt);
        if (retries && reason.transient && !closed && Date.now() + wait < deadline) {
          options.onRetry?.(reason.text, wait);
          await sleep(wait);
          continue;
        }
        throw new UnreachableError(base, reason.text);
      }

      if ((status >= 200 && status < 300) || (init.graphql && isGraphqlResponse(text))) {
        if (init.download) return { status, text, data: undefined };
        return { status, text, data: init.json === false ? text : parseJson(status, text) };
      }
      const body = errorBody(status, text);
      const error = new ApiError(status, body, Boolean(apiKey));
      if (key) {
        // A kept answer is the write's outcome (a 502 for a reverted transaction, say):
        // asking again gets the same.
        const final =
          keptAnswer || error.isCooldown || (status === 503 && /api key/i.test(error.message));
        await afterWrite(
          attempt,
          { kind: 'status', status, retryAfterMs, final },
          `HTTP ${status}`,
          error,
          { status, body },
          keptAnswer,
        );
        continue;
      }
      // Never sooner than the backoff (a Retry-After of 0 is not an invitation to spin);
      // a Retry-After beyond the budget is not waited out: the caller hears 429 at once.
      const wait = Math.max(retryAfterMs ?? 0, backoff(attempt), MIN_RETRY_WAIT_MS);
      const retryable =
        retries &&
        RETRYABLE_STATUSES.has(status) &&
        !error.isCooldown &&
        // The spec's 503 "no API keys configured" will not change by waiting.
        !(status === 503 && /api key/i.test(error.message));
      if (retryable && !closed && Date.now() + wait < deadline) {
        options.onRetry?.(`HTTP ${status}`, wait);
        await sleep(wait);
        continue;
      }
      throw error;
    }
  }

  /** A write: the body as received, and the parsed value when it matches the contract. */
  async function write<S extends z.ZodType>(
    shape: ShapeOf<S>,
    path: string,
    body: unknown,
  ): Promise<WriteResponse<z.output<S>>> {
    const response = await send('POST', path, { body, auth: true, keyed: true });
    if (shape === null) return { ...response, parsed: response.data as z.output<S> };
    const parsed = shape(await schemas()).safeParse(response.data);
    return { ...response, parsed: parsed.success ? parsed.data : undefined };
  }

  /**
   * A write of the sandbox admin API (X-Admin-Token): the body as received, and the parsed
   * value when it matches the contract (a write that happened is never refused for its shape).
   */
  async function adminWrite<S extends z.ZodType>(
    shape: (schemas: Schemas) => S,
    adminToken: string,
    method: 'POST' | 'DELETE',
    path: string,
    body?: unknown,
  ): Promise<WriteResponse<z.output<S>>> {
    const response = await send(method, path, {
      body,
      headers: { 'x-admin-token': adminToken },
      keyed: true,
    });
    const parsed = shape(await schemas()).safeParse(response.data);
    return { ...response, parsed: parsed.success ? parsed.data : undefined };
  }

  /** A call whose answer must match its schema; `data` is the parsed value. */
  async function call<S extends z.ZodType>(
    shape: ShapeOf<S>,
    method: 'GET' | 'POST',
    path: string,
    init: { body?: unknown; auth?: boolean; headers?: Record<string, string> } = {},
  ): Promise<ApiResponse<z.output<S>>> {
    const response = await send(method, path, init);
    if (shape === null) return response as ApiResponse<z.output<S>>;
    const contract = await schemas();
    const parsed = shape(contract).safeParse(response.data);
    if (!parsed.success) {
      throw new UnexpectedResponseError(
        response.status,
        `unexpected answer from ${method} ${path}: ${contract.describeZodError(parsed.error, 'body')}`,
      );
    }
    return { ...response, data: parsed.data };
  }

  function read<A extends unknown[], S extends z.ZodType>(
    shape: ShapeOf<S>,
    request: (...args: A) => Request,
  ): Read<A, z.output<S>> {
    return Object.assign(
      (...args: A) => {
        const { method, path, ...init } = request(...args);
        return call(shape, method, path, init);
      },
      {
        asReceived: (...args: A) => {
          const { method, path, ...init } = request(...args);
          return send(method, path, init);
        },
      },
    );
  }

  return {
    baseUrl: base,
    /** The service's scheme://host:port. */
    origin,
    /**
     * The key of the next write, taken before it is sent: for a write whose request must be
     * kept under its key before its first try (a registration, see src/cli/registration.ts).
     */
    nextWriteKey,
    /**
     * Now by the service's clock, in ms, when an answer has carried one: the sandbox stamps
     * every answer with X-Sandbox-Time (its clock moves with `sandbox advance`). Undefined
     * otherwise, as for the live service, whose time is the wall clock.
     */
    sandboxNowMs: (): number | undefined =>
      sandboxTime && sandboxTime.seconds * 1000 + (Date.now() - sandboxTime.seenAtMs),
    hasApiKey: async () => Boolean(await options.apiKey?.()),
    /**
     * Any request, for `agentctl api`: the key is attached when there is one, and `headers`
     * as given (an Idempotency-Key, say: sent as it is, never retried).
     */
    raw: (method: string, path: string, body?: unknown, headers?: Record<string, string>) =>
      send(method, path.startsWith('/') ? path : `/${path}`, {
        body,
        auth: true,
        json: false,
        mayWrite: method !== 'GET',
        ...(headers && { headers }),
      }),
    /**
     * A GraphQL operation at /graphql (the data API's): the response as received, with its
     * data and errors parsed (unknown fields kept). The key is attached for the rate tier.
     */
    graphql: async (query: string, variables: Record<string, unknown> = {}) => {
      const response = await send('POST', '/graphql', {
        body: { query, variables },
        auth: true,
        graphql: true,
      });
      const parsed = (await schemas()).GraphqlResponse.safeParse(response.data);
      if (!parsed.success) {
        throw new UnexpectedResponseError(
          response.status,
          `unexpected answer from POST /graphql: not a GraphQL response`,
        );
      }
      return { ...response, data: parsed.data };
    },
    health: () => call((s) => s.Health, 'GET', '/health'),
    vaults: read(
      (s) => s.VaultList,
      () => ({ method: 'GET', path: '/api/v1/vaults' }),
    ),
    // Shapes the spec leaves open: any JSON is accepted and shown generically.
    proposals: read(null, () => ({ method: 'GET', path: '/api/v1/proposals' })),
    stats: read(
      (s) => s.AgentStats,
      () => ({ method: 'GET', path: '/api/v1/agents/stats' }),
    ),
    leaderboard: read(
      (s) => s.Leaderboard,
      (limit?: number) => ({
        method: 'GET',
        path: `/api/v1/agents${limit === undefined ? '' : `?limit=${limit}`}`,
      }),
    ),
    nonce: (wallet: string) =>
      call(
        (s) => s.NonceResponse,
        'GET',
        `/api/v1/agent/auth/nonce?wallet=${encodeURIComponent(wallet)}`,
      ),
    /**
     * Lenient: the one-time API key must never be lost to a shape check. `writeKey`: its key
     * taken beforehand (nextWriteKey), else the next one.
     */
    async register(
      body: Record<string, unknown>,
      writeKey?: WriteKey,
    ): Promise<WriteResponse<RegisterResponse>> {
      const response = await send('POST', '/api/v1/agent/auth/register', {
        body,
        keyed: true,
        ...(writeKey && { writeKey }),
      });
      const parsed = (await schemas()).RegisterResponse.safeParse(response.data);
      return { ...response, parsed: parsed.success ? parsed.data : undefined };
    },
    lookup: read(
      (s) => s.LookupResponse,
      (wallet: string) => ({
        method: 'GET',
        path: `/api/v1/agent/auth/lookup?wallet=${encodeURIComponent(wallet)}`,
      }),
    ),
    // Authenticated reads.
    wallet: read(
      (s) => s.WalletStatus,
      () => ({
        method: 'GET',
        path: '/api/v1/agent/wallet',
        auth: true,
      }),
    ),
    positions: read(
      (s) => s.Positions,
      () => ({
        method: 'GET',
        path: '/api/v1/agent/vault/positions',
        auth: true,
      }),
    ),
    strategies: read(
      (s) => s.StrategyList,
      () => ({
        method: 'GET',
        path: '/api/v1/agent/strategy/list',
        auth: true,
      }),
    ),
    eligibility: read(null, () => ({
      method: 'GET',
      path: '/api/v1/agent/galaxy/eligibility',
      auth: true,
    })),
    // Public reads of any wallet.
    walletPositions: read(null, (wallet: string) => ({
      method: 'POST',
      path: '/api/v1/positions',
      body: { wallet_address: wallet },
    })),
    nfts: read(null, (wallet: string) => ({
      method: 'POST',
      path: '/api/v1/nfts',
      body: { wallet_address: wallet },
    })),
    /**
     * Part B, the data API (REST under /v1), on this client's base URL: the CLI makes a
     * client for the data URL (--data-url) and uses these. The API key, when there is one,
     * selects the authenticated rate tier.
     */
    data: {
      vaults: read(
        (s) => s.DataVaultList,
        (query: Query = {}) => ({
          method: 'GET',
          path: `/v1/vaults${queryString(query)}`,
          auth: true,
        }),
      ),
      vault: read(
        (s) => s.DataVaultDetail,
        (address: string) => ({ method: 'GET', path: `/v1/vaults/${address}`, auth: true }),
      ),
      history: read(
        (s) => s.VaultHistory,
        (address: string, query: Query = {}) => ({
          method: 'GET',
          path: `/v1/vaults/${address}/history${queryString(query)}`,
          auth: true,
        }),
      ),
      strategies: read(
        (s) => s.DataStrategyList,
        (query: Query = {}) => ({
          method: 'GET',
          path: `/v1/strategies${queryString(query)}`,
          auth: true,
        }),
      ),
      performance: read(
        (s) => s.StrategyPerformance,
        (id: string) => ({ method: 'GET', path: `/v1/strategies/${id}/performance`, auth: true }),
      ),
      positions: read(
        (s) => s.UserPositions,
        (address: string) => ({
          method: 'GET',
          path: `/v1/users/${address}/positions`,
          auth: true,
        }),
      ),
      transactions: read(
        (s) => s.UserTransactions,
        (address: string, query: Query = {}) => ({
          method: 'GET',
          path: `/v1/users/${address}/transactions${queryString(query)}`,
          auth: true,
        }),
      ),
      stats: read(
        (s) => s.ProtocolStats,
        () => ({ method: 'GET', path: '/v1/protocol/stats', auth: true }),
      ),
      nodes: read(
        (s) => s.DataNodeList,
        () => ({ method: 'GET', path: '/v1/nodes', auth: true }),
      ),
    },
    // Writes: keyed (retried only where keys are honoured), and never rejected for their shape
    // once they have happened.
    deposit: (body: { vault_id: string; amount_usdc: number }) =>
      write((s) => s.DepositResult, '/api/v1/agent/vault/deposit', body),
    submitStrategy: (body: Record<string, unknown>) =>
      write((s) => s.StrategySubmitResult, '/api/v1/agent/strategy/submit', body),
    vote: (body: { proposal_id: number; support: number; reason?: string }) =>
      write(null, '/api/v1/agent/governance/vote', body),
    async faucet() {
      const response = await send('POST', '/api/v1/agent/faucet', { auth: true, keyed: true });
      const { ErrorBody, FaucetSuccess, describeZodError } = await schemas();
      // A service may answer the cooldown with 200 and success: false; it is a failure either way.
      const cooldown = ErrorBody.safeParse(response.data);
      if (cooldown.success && (response.data as { success?: unknown }).success === false) {
        throw new ApiError(response.status, cooldown.data, true);
      }
      const parsed = FaucetSuccess.safeParse(response.data);
      if (!parsed.success) {
        throw new UnexpectedResponseError(
          response.status,
          `unexpected answer from POST /api/v1/agent/faucet: ${describeZodError(parsed.error, 'body')}`,
        );
      }
      return { ...response, data: parsed.data };
    },
    /** The sandbox admin API (`agentctl serve` only), with its X-Admin-Token. */
    sandbox: (adminToken: string, method: 'GET' | 'POST', path: string, body?: unknown) =>
      send(method, path, {
        body,
        headers: { 'x-admin-token': adminToken },
        keyed: method !== 'GET',
      }),
    /**
     * The sandbox's snapshots (admin API, X-Admin-Token): take, list, restore, delete and
     * export. Writes are keyed; a restore answers once every part is back.
     */
    snapshots: {
      take: (adminToken: string, body: SnapshotRequest) =>
        adminWrite((s) => s.SnapshotInfo, adminToken, 'POST', '/sandbox/snapshots', body),
      list: read(
        (s) => s.SnapshotList,
        (adminToken: string) => ({
          method: 'GET',
          path: '/sandbox/snapshots',
          headers: { 'x-admin-token': adminToken },
        }),
      ),
      restore: (adminToken: string, name: string) =>
        adminWrite(
          (s) => s.RestoreResult,
          adminToken,
          'POST',
          `/sandbox/snapshots/${encodeURIComponent(name)}/restore`,
        ),
      delete: (adminToken: string, name: string) =>
        adminWrite(
          (s) => s.SnapshotDeleted,
          adminToken,
          'DELETE',
          `/sandbox/snapshots/${encodeURIComponent(name)}`,
        ),
      /**
       * The snapshot as one exported file: its bytes go to the stream `open` returns, opened
       * anew for each try (a GET is retried: the caller starts its file over). The file holds
       * the wallet's mnemonic; where it goes is the caller's care.
       */
      export: async (adminToken: string, name: string, open: () => Writable): Promise<void> => {
        await send('GET', `/sandbox/snapshots/${encodeURIComponent(name)}/export`, {
          headers: {
            'x-admin-token': adminToken,
            accept: 'application/octet-stream, application/json',
          },
          download: open,
        });
      },
    },
    close: async () => {
      closed = true;
      transport.close();
    },
  };
}
export type ApiClient = ReturnType<typeof createApiClient>;

/** A key for one write, to be given again as it is. */
function freshKey(): WriteKey {
  const key = newIdempotencyKey();
  return { key, rerunKey: key };
}

/**
 * How a keyed write's try failed without an answer: lost once it may have reached the service
 * (reset, no answer in time), not sent when it cannot have; undefined for other failures
 * (an answer too large, a local error), which end the write as they are.
 */
function writeTry(error: unknown): WriteTry | undefined {
  switch ((error as { code?: unknown }).code) {
    case 'ECONNRESET':
    case 'EPIPE':
    // The system's own timeout may come on a connection that carried the request already.
    case 'ETIMEDOUT':
    case TIMED_OUT_ANSWERING:
      return { kind: 'lost' };
    case 'ECONNREFUSED':
    case 'ENOTFOUND':
      return { kind: 'not-sent', transient: false };
    case 'EAI_AGAIN':
    case TIMED_OUT_CONNECTING:
      return { kind: 'not-sent', transient: true };
    default:
      // An answer that is not HTTP (llhttp's HPE_* codes) came after the request was sent.
      return String((error as { code?: unknown }).code).startsWith('HPE_')
        ? { kind: 'lost' }
        : undefined;
  }
}

function parseRetryAfter(value: string | string[] | undefined): number | undefined {
  const text = Array.isArray(value) ? value[0] : value;
  if (text === undefined) return undefined;
  const seconds = Number(text);
  if (Number.isFinite(seconds) && seconds >= 0) return seconds * 1000;
  const date = Date.parse(text);
  return Number.isNaN(date) ? undefined : Math.max(0, date - Date.now());
}

function parseJson(status: number, text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    throw new UnexpectedResponseError(
      status,
      `the service answered ${status} with a body that is not JSON`,
    );
  }
}

/** Query parameters; undefined ones are left out. */
type Query = Record<string, string | number | undefined>;

function queryString(query: Query): string {
  const params = new URLSearchParams();
  for (const [name, value] of Object.entries(query)) {
    if (value !== undefined) params.set(name, String(value));
  }
  const text = params.toString();
  return text ? `?${text}` : '';
}

/** Text as one line of at most `max` characters: tags dropped, whitespace collapsed. */
function oneLine(text: string, max: number): string {
  const flat = text
    .replace(/<(script|style)\b[\s\S]*?<\/\1>/gi, ' ')
    .replace(/<[^>]*>/g, ' ')
    .replace(/\s+/g, ' ')
    .trim();
  return flat.length > max ? `${flat.slice(0, max - 1)}…` : flat;
}

/** What a non-JSON error body is said as: that it is not JSON, and how it begins. */
function notJsonMessage(text: string): string {
  const start = oneLine(text, 60);
  return `${NOT_JSON_ANSWER}${start ? ` (it begins "${start}")` : ''}`;
}

/** Whether a body is a GraphQL response (data or errors), whatever its HTTP status. */
function isGraphqlResponse(text: string): boolean {
  try {
    const body = JSON.parse(text) as Record<string, unknown> | null;
    return (
      typeof body === 'object' && body !== null && (Array.isArray(body.errors) || 'data' in body)
    );
  } catch {
    return false;
  }
}

/**
 * The error body with all its fields. A JSON object without `error` gets one from its
 * `message` or `detail`; a non-JSON error page gets one line saying so.
 */
function errorBody(status: number, text: string): ErrorBody {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    // An HTML error page, a proxy's text: one line, never the page itself.
    return { error: notJsonMessage(text) };
  }
  // A bare JSON string is the message; another value is shown as it came, on one line.
  if (typeof parsed === 'string' && parsed.trim() !== '') return { error: oneLine(parsed, 200) };
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    return { error: `HTTP ${status}: ${oneLine(text, 200)}` };
  }
  const fields = parsed as Record<string, unknown>;
  // The data API's shape: {error: {code, message, details}}.
  const nested =
    typeof fields.error === 'object' && fields.error !== null && !Array.isArray(fields.error)
      ? (fields.error as Record<string, unknown>)
      : undefined;
  const message = [fields.error, nested?.message, fields.message, fields.detail].find(
    (value): value is string => typeof value === 'string' && value !== '',
  );
  const code = typeof nested?.code === 'string' ? nested.code : undefined;
  return {
    ...fields,
    ...(code !== undefined && { code, details: nested?.details }),
    error: message === undefined ? `HTTP ${status}` : code ? `${code}: ${message}` : message,
  };
}

/**
 * Why a request failed, whether waiting may help, and whether it timed out (also for
 * `agentctl doctor`, which makes its single tries with the transport directly).
 */
export function networkReason(error: unknown): {
  text: string;
  transient: boolean;
  timedOut: boolean;
} {
  const { code } = error as { code?: unknown };
  switch (code) {
    // Nothing listens there, or the name does not exist: waiting will not change it, so fail
    // at once (as gh and cast do) instead of spending the retry budget.
    case 'ECONNREFUSED':
      return {
        text: 'connection refused (is the service running?)',
        transient: false,
        timedOut: false,
      };
    case 'ENOTFOUND':
      return { text: 'host not found', transient: false, timedOut: false };
    case 'EAI_AGAIN':
      return { text: 'host not found (DNS did not answer)', transient: true, timedOut: false };
    case TIMED_OUT_CONNECTING:
    case 'ETIMEDOUT':
      return { text: 'timed out connecting', transient: true, timedOut: false };
    case TIMED_OUT_ANSWERING:
      return { text: 'timed out waiting for an answer', transient: true, timedOut: true };
    case ANSWER_TOO_LARGE:
      return { text: (error as Error).message, transient: false, timedOut: false };
    case 'ECONNRESET':
    case 'EPIPE':
      return { text: 'the connection was closed', transient: true, timedOut: false };
    default:
      return {
        text: error instanceof Error ? error.message : String(error),
        transient: false,
        timedOut: false,
      };
  }
}
