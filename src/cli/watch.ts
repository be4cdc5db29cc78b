import { type Client, createClient } from 'graphql-ws';
import {
  CLOSE_SANDBOX_RESTORED,
  type GraphqlError,
  TransactionCreatedEvent,
  VaultUpdatedEvent,
} from '../api/schemas/index.ts';
import type { Context } from './context.ts';
import { CliError, EXIT } from './exit-codes.ts';
import { clip, rawToDecimal, rawWithAmount, shortAddress } from './format.ts';
import { GraphqlFailure, graphqlSocketUrl } from './graphql.ts';

/** Reconnection waits: 0.25 s doubling to 10 s, each between half and all of that. */
const FIRST_RETRY_MS = 250;
const MAX_RETRY_MS = 10_000;
/** A ping every KEEP_ALIVE_MS; no pong within PONG_TIMEOUT_MS means the connection is dead. */
const KEEP_ALIVE_MS = 15_000;
const PONG_TIMEOUT_MS = 10_000;

/** How often follow() pings, and how long it waits for the pong (tests shorten both). */
export interface KeepAlive {
  pingEveryMs: number;
  pongTimeoutMs: number;
}

/** The sandbox's close code for a connection_init over the rate tier's limit. */
const RATE_LIMITED_CLOSE = 4290;
/** The server's close codes that waiting will not change. */
const FATAL_CLOSE_CODES = new Set([4400, 4403, 4429, 4500, 1002, 1003, 1008]);

/**
 * The --json line said when the sandbox was restored to a snapshot, between events: what came
 * before it may no longer hold. Events carry no `event` field, so it cannot be taken for one.
 */
export const SANDBOX_RESTORED_EVENT = 'sandbox_restored';

/** vaultUpdated, with `updatedAt`: the time of the block the state is at (our addition). */
export const VAULT_SUBSCRIPTION = `subscription ($address: String!) {
  vaultUpdated(address: $address) { address name tvl tvlUsd totalShares pricePerShare apy { current } updatedAt }
}`;
export const TRANSACTION_SUBSCRIPTION = `subscription ($vault: String) {
  transactionCreated(vaultAddress: $vault) {
    hash type status amount shares user timestamp vault { address name }
  }
}`;

/** A vault as the user named it: `moderate (0x0763…279C)`, or its address as given. */
export function vaultLabel(given: string, address: string): string {
  return given.startsWith('0x') ? address : `${given} (${shortAddress(address)})`;
}

/**
 * A vault event as a human line, stamped with its block's time (never the local clock). It
 * fits 80 columns: the vault is the one watched (named when the watch starts); `wide` adds
 * its name and the raw units.
 */
export function vaultLine(data: unknown, wide = false): string {
  const event = VaultUpdatedEvent.parse(data);
  const price = (Number(event.pricePerShare) / 1e6).toFixed(6);
  const apy = `apy ${Number(event.apy.current.toFixed(4))} %`;
  return wide
    ? `${event.updatedAt}  ${event.name}  tvl ${rawWithAmount(event.tvl, 'USDC')}  price ${price}  ${apy}`
    : `${event.updatedAt}  tvl ${rawToDecimal(event.tvl)} USDC  price ${price}  ${apy}`;
}

/**
 * A transaction event as human lines, stamped with its block's time: within 80 columns, the
 * time, type, status and amount, then the vault, the user and the hash shortened; `wide`
 * gives one line with every value whole (--json gives the event as received).
 */
export function transactionLine(data: unknown, wide = false): string {
  const event = TransactionCreatedEvent.parse(data);
  const redeem = event.type === 'REDEEM_REQUEST' && event.shares !== null;
  const type = event.type.toLowerCase();
  const status = event.status.toLowerCase();
  if (wide) {
    const amount = redeem
      ? rawWithAmount(event.shares as string, 'shares')
      : rawWithAmount(event.amount, 'USDC');
    return `${event.timestamp}  ${type}  ${status}  ${amount}  ${event.vault.name}  user ${event.user}  tx ${event.hash}`;
  }
  const amount = redeem
    ? `${rawToDecimal(event.shares as string)} shares`
    : `${rawToDecimal(event.amount)} USDC`;
  return (
    `${event.timestamp}  ${type}  ${status}  ${amount}\n` +
    `  ${clip(event.vault.name, 32)}  user ${shortAddress(event.user)}  tx ${shortAddress(event.hash)}`
  );
}

/**
 * Subscribes and hands each event's data to `show` until `count` events (or forever), Ctrl-C
 * (exit 130) or a failure that reconnecting will not mend.
 */
export async function follow(
  context: Context,
  subscription: {
    query: string;
    variables: Record<string, unknown>;
    count?: number | undefined;
    /** What is awaited, for the line a person sees while nothing has come yet. */
    awaiting: string;
  },
  show: (data: Record<string, unknown>) => void,
  keepAlive: KeepAlive = { pingEveryMs: KEEP_ALIVE_MS, pongTimeoutMs: PONG_TIMEOUT_MS },
): Promise<void> {
  const { query, variables, count } = subscription;
  const out = await context.output();
  const dataUrl = await context.dataUrl();
  const url = graphqlSocketUrl(dataUrl);
  const apiKey = await context.apiKeyFor(dataUrl);
  let connectedOnce = false;
  let lost = false;
  /**
   * The sandbox was restored (close code CLOSE_SANDBOX_RESTORED): the server is up and
   * closed on purpose, so the next connection is made at once, without a backoff wait.
   */
  let restored = false;
  /** Set while that one immediate reconnection is under way (another failure backs off). */
  let resubscribing = false;
  /** The wait before the next reconnection: cleared at the end, so it holds no exit up. */
  let retryTimer: NodeJS.Timeout | undefined;
  /** A half-open connection answers no ping: closing it lets the client reconnect. */
  let pongTimer: NodeJS.Timeout | undefined;
  let socket: { readyState: number; close(code: number, reason: string): void } | undefined;
  const client: Client = createClient({
    url,
    lazy: true,
    // An API key puts the socket in the key's rate tier; without one it is public.
    connectionParams: apiKey ? { apiKey } : {},
    retryAttempts: Number.POSITIVE_INFINITY,
    keepAlive: keepAlive.pingEveryMs,
    // Never at start (a wrong URL fails at once); after that, unless the server said no.
    shouldRetry: (event) => connectedOnce && !isFatal(event),
    retryWait: async (retries) => {
      if (restored) {
        restored = false;
        resubscribing = true;
        return;
      }
      const cap = Math.min(MAX_RETRY_MS, FIRST_RETRY_MS * 2 ** retries);
      const wait = Math.round(cap / 2 + Math.random() * (cap / 2));
      out.notice(`connection to ${url} lost; reconnecting in ${(wait / 1000).toFixed(1)} s`);
      await new Promise<void>((resolve) => {
        retryTimer = setTimeout(resolve, wait);
      });
    },
    on: {
      connected: (connected) => {
        socket = connected as typeof socket;
        if (resubscribing) out.notice(`subscribed again to ${url}, on the restored sandbox`);
        else if (lost) {
          out.notice(`reconnected to ${url}; events while it was down are not replayed`);
        }
        // A person sees nothing until the first event: say that it is listening.
        else if (!connectedOnce) {
          out.info(`watching ${url}: waiting for ${subscription.awaiting} (Ctrl-C to stop)`);
        }
        connectedOnce = true;
        lost = false;
        resubscribing = false;
      },
      ping: (received) => {
        if (received) return;
        clearTimeout(pongTimer);
        pongTimer = setTimeout(() => {
          // 1 is OPEN; 4408 is not fatal, so the client reconnects.
          if (socket?.readyState === 1) socket.close(4408, 'no pong from the server');
        }, keepAlive.pongTimeoutMs);
      },
      pong: (received) => {
        if (received) clearTimeout(pongTimer);
      },
      closed: (event) => {
        clearTimeout(pongTimer);
        if (connectedOnce) lost = true;
        if ((event as { code?: unknown } | undefined)?.code === CLOSE_SANDBOX_RESTORED) {
          restored = true;
          out.notice(
            'the sandbox was restored to a snapshot: what was shown before may no longer hold; subscribing again',
          );
          // In the stream of events too, where a script reading stdout will see it.
          if (out.json) out.print(JSON.stringify({ event: SANDBOX_RESTORED_EVENT }));
        }
      },
    },
  });

  let seen = 0;
  let stop: (() => void) | undefined;
  let interrupted = () => {};
  const done = new Promise<void>((resolve, reject) => {
    interrupted = () => reject(new CliError('cancelled', EXIT.cancelled));
    process.once('SIGINT', interrupted);
    stop = client.subscribe(
      { query, variables },
      {
        next: (value) => {
          if (value.errors?.length) {
            reject(new GraphqlFailure(value.errors as unknown as GraphqlError[]));
            return;
          }
          try {
            show((value.data ?? {}) as Record<string, unknown>);
          } catch (error) {
            // An event this version cannot read (or a closed stdout): say so, not "closed".
            reject(error);
            return;
          }
          seen++;
          if (count !== undefined && seen >= count) resolve();
        },
        error: (error) => reject(failureOf(error, url)),
        complete: () => resolve(),
      },
    );
  });
  try {
    await done;
  } finally {
    process.removeListener('SIGINT', interrupted);
    clearTimeout(retryTimer);
    clearTimeout(pongTimer);
    stop?.();
    await client.dispose();
  }
}

function isFatal(event: unknown): boolean {
  const code = (event as { code?: unknown } | undefined)?.code;
  return typeof code === 'number' && FATAL_CLOSE_CODES.has(code);
}

/** What ended a subscription, as the CLI reports it. */
function failureOf(error: unknown, url: string): CliError {
  if (Array.isArray(error)) return new GraphqlFailure(error as GraphqlError[]);
  const { code, reason } = (error ?? {}) as { code?: number; reason?: string };
  if (code === 4403) {
    return new CliError(
      `${url} refused the API key: ${reason || 'forbidden'}; check --api-key or the profile's key, or send none`,
      EXIT.auth,
    );
  }
  if (code === RATE_LIMITED_CLOSE) {
    return new CliError(
      `${url} refused the connection: ${reason || 'rate limited'}; wait, or use an API key for a higher tier`,
      EXIT.rateLimited,
    );
  }
  if (typeof code === 'number') {
    return new CliError(
      `the connection to ${url} closed (${code}${reason ? `: ${reason}` : ''})`,
      EXIT.unreachable,
    );
  }
  return new CliError(
    `cannot reach ${url}: ${error instanceof Error ? error.message : 'the WebSocket failed'}`,
    EXIT.unreachable,
  );
}
