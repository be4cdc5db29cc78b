import { setTimeout as sleep } from 'node:timers/promises';
import { Agent, request as undiciRequest } from 'undici';
import { z } from 'zod';
import { ApiError, UnexpectedResponseError, UnreachableError } from './errors.ts';
import {
  AgentStats,
  DepositResult,
  describeZodError,
  ErrorBody,
  FaucetSuccess,
  Health,
  Leaderboard,
  LookupResponse,
  NonceResponse,
  Positions,
  RegisterResponse,
  StrategyList,
  StrategySubmitResult,
  VaultList,
  WalletStatus,
} from './schemas/index.ts';

export interface ApiClientOptions {
  baseUrl: string;
  apiKey?: string;
  userAgent: string;
  /** Per attempt: connecting, then waiting for headers and body. */
  timeoutMs?: number;
  /** All attempts of one GET together, retries and waits included. */
  retryBudgetMs?: number;
  /** Called before each retry, for --verbose. */
  onRetry?: (reason: string, waitMs: number) => void;
}

/** One answer: the body exactly as received, and parsed JSON. */
export interface ApiResponse<T = unknown> {
  status: number;
  text: string;
  data: T;
}

/** An answer whose shape the spec does not show. */
const OpenShape = z.unknown();

const RETRYABLE_STATUSES = new Set([429, 502, 503, 504]);
const DEFAULT_TIMEOUT_MS = 15_000;
const DEFAULT_RETRY_BUDGET_MS = 10_000;
const MAX_BACKOFF_MS = 4_000;

/**
 * The service's HTTP client: one typed method per endpoint, responses parsed with the
 * shared schemas (unknown fields pass through in `text`).
 *
 * GETs are retried with exponential backoff and full jitter on 429 (honouring Retry-After),
 * 502, 503 and 504, and on connection errors, within one overall budget; POSTs never are,
 * since a write might have happened.
 */
export function createApiClient(options: ApiClientOptions) {
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const budgetMs = options.retryBudgetMs ?? DEFAULT_RETRY_BUDGET_MS;
  const dispatcher = new Agent({
    connectTimeout: Math.min(timeoutMs, 5_000),
    headersTimeout: timeoutMs,
    bodyTimeout: timeoutMs,
  });
  const base = options.baseUrl.replace(/\/+$/, '');

  async function send(
    method: string,
    path: string,
    init: { body?: unknown; auth?: boolean; headers?: Record<string, string> },
  ): Promise<ApiResponse> {
    const url = `${base}${path}`;
    const headers: Record<string, string> = {
      'user-agent': options.userAgent,
      accept: 'application/json',
    };
    if (init.auth && options.apiKey) headers['x-api-key'] = options.apiKey;
    if (init.body !== undefined) headers['content-type'] = 'application/json';
    Object.assign(headers, init.headers);
    const deadline = Date.now() + budgetMs;
    for (let attempt = 0; ; attempt++) {
      let status: number;
      let text: string;
      let retryAfterMs: number | undefined;
      try {
        const response = await undiciRequest(url, {
          method,
          headers,
          dispatcher,
          ...(init.body !== undefined ? { body: JSON.stringify(init.body) } : {}),
        });
        status = response.statusCode;
        text = await response.body.text();
        retryAfterMs = parseRetryAfter(response.headers['retry-after']);
      } catch (error) {
        const reason = networkReason(error);
        const wait = backoff(attempt);
        if (method === 'GET' && Date.now() + wait < deadline) {
          options.onRetry?.(reason, wait);
          await sleep(wait);
          continue;
        }
        throw new UnreachableError(base, reason);
      }

      if (status >= 200 && status < 300) return { status, text, data: parseJson(status, text) };
      const body = errorBody(status, text);
      const error = new ApiError(status, body, Boolean(init.auth && options.apiKey));
      // A Retry-After beyond the budget is not waited out: the caller hears 429 at once.
      const wait = retryAfterMs ?? backoff(attempt);
      const retryable =
        method === 'GET' &&
        RETRYABLE_STATUSES.has(status) &&
        !error.isCooldown &&
        // The spec's 503 "no API keys configured" will not change by waiting.
        !(status === 503 && /api key/i.test(error.message));
      if (retryable && Date.now() + wait < deadline) {
        options.onRetry?.(`HTTP ${status}`, wait);
        await sleep(wait);
        continue;
      }
      throw error;
    }
  }

  /** A call whose answer must match `schema`; `data` is the parsed value. */
  async function call<S extends z.ZodType>(
    schema: S,
    method: 'GET' | 'POST',
    path: string,
    init: { body?: unknown; auth?: boolean } = {},
  ): Promise<ApiResponse<z.output<S>>> {
    const response = await send(method, path, init);
    const parsed = schema.safeParse(response.data);
    if (!parsed.success) {
      throw new UnexpectedResponseError(
        response.status,
        `unexpected answer from ${method} ${path}: ${describeZodError(parsed.error, 'body')}`,
      );
    }
    return { ...response, data: parsed.data };
  }

  return {
    baseUrl: base,
    hasApiKey: Boolean(options.apiKey),
    /** Any request, for `agentctl api`: the key is attached when there is one. */
    raw: (method: string, path: string, body?: unknown) =>
      send(method, path.startsWith('/') ? path : `/${path}`, { body, auth: true }),
    health: () => call(Health, 'GET', '/health'),
    vaults: () => call(VaultList, 'GET', '/api/v1/vaults'),
    // Shapes the spec leaves open: any JSON is accepted and shown generically.
    proposals: () => call(OpenShape, 'GET', '/api/v1/proposals'),
    stats: () => call(AgentStats, 'GET', '/api/v1/agents/stats'),
    leaderboard: (limit?: number) =>
      call(Leaderboard, 'GET', `/api/v1/agents${limit === undefined ? '' : `?limit=${limit}`}`),
    nonce: (wallet: string) =>
      call(NonceResponse, 'GET', `/api/v1/agent/auth/nonce?wallet=${encodeURIComponent(wallet)}`),
    register: (body: Record<string, unknown>) =>
      call(RegisterResponse, 'POST', '/api/v1/agent/auth/register', { body }),
    lookup: (wallet: string) =>
      call(LookupResponse, 'GET', `/api/v1/agent/auth/lookup?wallet=${encodeURIComponent(wallet)}`),
    // Authenticated reads.
    wallet: () => call(WalletStatus, 'GET', '/api/v1/agent/wallet', { auth: true }),
    positions: () => call(Positions, 'GET', '/api/v1/agent/vault/positions', { auth: true }),
    strategies: () => call(StrategyList, 'GET', '/api/v1/agent/strategy/list', { auth: true }),
    eligibility: () => call(OpenShape, 'GET', '/api/v1/agent/galaxy/eligibility', { auth: true }),
    // Public reads of any wallet.
    walletPositions: (wallet: string) =>
      call(OpenShape, 'POST', '/api/v1/positions', { body: { wallet_address: wallet } }),
    nfts: (wallet: string) =>
      call(OpenShape, 'POST', '/api/v1/nfts', { body: { wallet_address: wallet } }),
    // Writes: never retried.
    deposit: (body: { vault_id: string; amount_usdc: number }) =>
      call(DepositResult, 'POST', '/api/v1/agent/vault/deposit', { body, auth: true }),
    submitStrategy: (body: Record<string, unknown>) =>
      call(StrategySubmitResult, 'POST', '/api/v1/agent/strategy/submit', { body, auth: true }),
    vote: (body: { proposal_id: number; support: number; reason?: string }) =>
      call(OpenShape, 'POST', '/api/v1/agent/governance/vote', { body, auth: true }),
    async faucet() {
      const response = await send('POST', '/api/v1/agent/faucet', { auth: true });
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
      send(method, path, { body, headers: { 'x-admin-token': adminToken } }),
    close: () => dispatcher.close(),
  };
}
export type ApiClient = ReturnType<typeof createApiClient>;

/** Exponential backoff with full jitter: a random wait up to 250 ms × 2^attempt, capped. */
function backoff(attempt: number): number {
  return Math.round(Math.random() * Math.min(MAX_BACKOFF_MS, 250 * 2 ** attempt));
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

/** The error body; a non-JSON error page still gets a readable message. */
function errorBody(status: number, text: string): ErrorBody {
  try {
    const parsed = ErrorBody.safeParse(JSON.parse(text));
    if (parsed.success) return parsed.data;
  } catch {
    // Not JSON: fall through.
  }
  const snippet = text.trim().slice(0, 200);
  return { error: snippet ? `HTTP ${status}: ${snippet}` : `HTTP ${status}` };
}

function networkReason(error: unknown): string {
  const code = (error as { code?: string }).code;
  switch (code) {
    case 'ECONNREFUSED':
      return 'connection refused (is the service running?)';
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
      return 'host not found';
    case 'UND_ERR_CONNECT_TIMEOUT':
      return 'timed out connecting';
    case 'UND_ERR_HEADERS_TIMEOUT':
    case 'UND_ERR_BODY_TIMEOUT':
      return 'timed out waiting for an answer';
    case 'ECONNRESET':
    case 'UND_ERR_SOCKET':
      return 'the connection was closed';
    default:
      return error instanceof Error ? error.message : String(error);
  }
}
