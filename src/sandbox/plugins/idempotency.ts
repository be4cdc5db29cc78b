import { createCipheriv, createDecipheriv, createHash, hkdfSync, randomBytes } from 'node:crypto';
import type { FastifyBaseLogger, FastifyReply, FastifyRequest } from 'fastify';
import type { z } from 'zod';
import {
  IDEMPOTENCY_KEY_HEADER,
  IDEMPOTENCY_RETENTION_SECONDS,
  IDEMPOTENT_REPLAYED_HEADER,
  MAX_IDEMPOTENCY_KEYS,
  MAX_IDEMPOTENCY_KEYS_PER_CALLER,
} from '../../api/schemas/index.ts';
import { HttpError } from '../errors.ts';
import { createKeyedLock } from '../keyed-lock.ts';
import type { IdempotencyRow } from '../store/idempotency.ts';
import type { Store, StoreTx } from '../store/index.ts';
import { callerOf } from './auth.ts';

/**
 * `Idempotency-Key` on writes, as Stripe and the IETF draft have it. A route handler wrapped in
 * `keyed` runs once per key of its caller's scope; a repeat with the same method, route and
 * body is answered the stored status and body byte for byte, with `Idempotent-Replayed: true`.
 *
 * Exactly once through a crash: a write that changes the chain or sandbox.db stores its answer
 * in the very commit that makes its effects durable (`answerOf(request).commit` in its record
 * callback), so after kill -9 the key and the effect are both on disk or neither is. A write
 * with nothing to commit (refused by the chain, say) stores its answer in a commit of its own.
 * Nothing is stored for a request refused before it ran (validation, 401, rate limits), nor for
 * an answer that says to try later (429, 5xx but a transaction mined and reverted).
 */

/** Requests running with a key at once, at most: a bound on `running` (they are few). */
const MAX_RUNNING = 10_000;
/** How often expired keys are deleted. */
const PURGE_EVERY_MS = 60_000;
/** Keys are stored as a hash; answers under a key derived from the idempotency key. */
const ANSWER_KEY_INFO = 'agentctl idempotency answer v1';

/**
 * Statuses a write that ran may answer that are not stored: they refuse the caller, or say to
 * try again later. (A 409 the handler answers, a second vote say, is stored: it is final.)
 */
const UNSTORED = new Set([401, 403, 408, 425, 429]);

export interface IdempotencyDeps {
  store: Store;
  /** The state directory, kept out of stored error texts as the error handler does. */
  errorAnswer: (error: unknown) => { status: number; message: string } | undefined;
  log: FastifyBaseLogger;
  /** Wall-clock milliseconds (never sandbox time: a clock advance expires no key). */
  nowMs?: () => number;
}

/** What a handler calls inside the commit of its effects; does nothing for an unkeyed request. */
export interface KeyedAnswer {
  commit(tx: StoreTx, body: unknown, status?: number): Promise<void>;
  /**
   * The key's row with `body` as its answer, for a write that commits it with effects kept
   * outside the store's transactions (a restore's rows: see snapshots/index.ts); undefined for
   * an unkeyed request. The answer the write then returns is stored over it as usual.
   */
  row(body: unknown, status?: number): IdempotencyRow | undefined;
}

interface Running {
  id: string;
  scope: string;
  scopeHash: string;
  key: string;
  fingerprint: string;
  /** The write is of files a restore does not undo: its key is kept through restores. */
  outlivesRestore: boolean;
  /** Set once the answer is in a commit (not yet fsynced, maybe). */
  stored: { status: number; text: string } | undefined;
}

// biome-ignore lint/suspicious/noExplicitAny: any route's handler, typed by its route.
type Handler = (request: any, reply: any) => Promise<any>;

export function createIdempotency({ store, errorAnswer, log, nowMs = Date.now }: IdempotencyDeps) {
  const running = new Map<string, Running>();
  const byRequest = new WeakMap<FastifyRequest, Running>();
  const retentionMs = IDEMPOTENCY_RETENTION_SECONDS * 1000;
  // Counted at start (purge), and kept up to date as keys are stored and purged.
  let held = 0;

  /** Serializes the checks of requests with the same key (see keyed). */
  const checking = createKeyedLock();

  async function purge(): Promise<void> {
    try {
      await store.idempotency.purge(nowMs() - retentionMs);
      held = await store.idempotency.count();
    } catch (error) {
      log.warn({ err: error }, 'expired idempotency keys were not purged');
    }
  }
  const counted = purge();
  const purger = setInterval(() => void purge(), PURGE_EVERY_MS);
  purger.unref();

  function rowOf(entry: Running, status: number, text: string): IdempotencyRow {
    return {
      id: entry.id,
      scope: entry.scopeHash,
      fingerprint: entry.fingerprint,
      status,
      answer: seal(entry, text),
      created_ms: nowMs(),
      outlives_restore: entry.outlivesRestore ? 1 : 0,
    };
  }

  async function storeRow(tx: StoreTx, entry: Running, status: number, text: string) {
    await tx.idempotency.insert(rowOf(entry, status, text));
    entry.stored = { status, text };
    held++;
  }

  function send(reply: FastifyReply, status: number, text: string, replayed: boolean) {
    return reply
      .code(status)
      .header(IDEMPOTENT_REPLAYED_HEADER, String(replayed))
      .type('application/json; charset=utf-8')
      .send(text);
  }

  return {
    /**
     * Wraps a write's handler: `scopeOf` names the caller (an agent, the admin token, a wallet).
     * Unkeyed requests run as before, with no Idempotent-Replayed header.
     */
    keyed<H extends Handler>(
      scopeOf: (request: FastifyRequest) => string,
      handler: H,
      options: {
        /** Bound the caller's keys (MAX_IDEMPOTENCY_KEYS_PER_CALLER): all but the admin token. */
        perCaller?: boolean;
        /** Snapshot files and restores, which a restore does not undo: keep their keys. */
        outlivesRestore?: boolean;
      } = { perCaller: true },
    ): H {
      const wrapped = async (request: FastifyRequest, reply: FastifyReply) => {
        const key = request.headers[IDEMPOTENCY_KEY_HEADER];
        // The route's header schema has checked it: a string of 1 to 255 printable characters.
        if (typeof key !== 'string') return handler(request, reply);
        const scope = scopeOf(request);
        const id = sha256(`${scope}\n${key}`);
        const fingerprint = fingerprintOf(request);

        // One request per key at a time between here and `running`: the reads below await,
        // and a second request with the key must find the first running, or its answer stored.
        const checked = await checking(id, async () => {
          // Running first: its answer may be in a commit not yet fsynced (or one that fails),
          // and is replayed only once the first request has been answered.
          const other = running.get(id);
          if (other) {
            if (other.fingerprint !== fingerprint) throw mismatch();
            reply.header('retry-after', '1');
            throw new HttpError(
              409,
              'a request with this Idempotency-Key is still running; retry in a second for its answer',
            );
          }
          const stored = await store.idempotency.find(id);
          if (stored) {
            if (stored.fingerprint !== fingerprint) throw mismatch();
            const entry = { id, scope, key };
            return { replayed: send(reply, stored.status, open(entry, stored.answer), true) };
          }
          // Refusals that run nothing, as a rate limit's do (429: a client may wait and retry).
          await counted;
          if (running.size >= MAX_RUNNING) {
            reply.header('retry-after', '1');
            throw new HttpError(429, 'too many keyed writes are running; retry in a second');
          }
          if (held >= MAX_IDEMPOTENCY_KEYS) {
            await purge();
            if (held >= MAX_IDEMPOTENCY_KEYS) {
              reply.header('retry-after', '60');
              throw new HttpError(
                429,
                `the sandbox holds ${MAX_IDEMPOTENCY_KEYS} idempotency keys of the last 24 hours, its most; retry later, or send this write without a key`,
              );
            }
          }
          const scopeHash = sha256(scope);
          if (
            options.perCaller &&
            (await store.idempotency.countOf(scopeHash)) >= MAX_IDEMPOTENCY_KEYS_PER_CALLER
          ) {
            reply.header('retry-after', '60');
            throw new HttpError(
              429,
              `this caller holds ${MAX_IDEMPOTENCY_KEYS_PER_CALLER} idempotency keys of the last 24 hours, its most; retry later, or send this write without a key`,
            );
          }

          const entry: Running = {
            id,
            scope,
            scopeHash,
            key,
            fingerprint,
            outlivesRestore: options.outlivesRestore ?? false,
            stored: undefined,
          };
          running.set(id, entry);
          byRequest.set(request, entry);
          return entry;
        });
        if ('replayed' in checked) return checked.replayed;
        const entry = checked;
        try {
          let result: unknown;
          try {
            result = await handler(request, reply);
          } catch (error) {
            // An answer put in a commit that then failed (rolled back, or durable and followed
            // by a failure) is not sent: a retry finds it stored, or runs the write again.
            const told = entry.stored ? undefined : errorAnswer(error);
            if (!told || !storable(told.status, error)) throw error;
            const text = JSON.stringify({ error: told.message });
            await store.commitSoon((tx) => storeRow(tx, entry, told.status, text));
            return send(reply, told.status, text, false);
          }
          if (entry.stored) return send(reply, entry.stored.status, entry.stored.text, false);
          const status = reply.statusCode;
          const text = serialize(request, status, result);
          if (storable(status, undefined)) {
            await store.commitSoon((tx) => storeRow(tx, entry, status, text));
          }
          return send(reply, status, text, false);
        } finally {
          running.delete(id);
        }
      };
      return wrapped as H;
    },

    /** The answer of `request`'s write, to commit with its effects. */
    answerOf(request: FastifyRequest): KeyedAnswer {
      return {
        async commit(tx: StoreTx, body: unknown, status = 200): Promise<void> {
          const entry = byRequest.get(request);
          if (entry && !entry.stored) {
            await storeRow(tx, entry, status, serialize(request, status, body));
          }
        },
        row(body: unknown, status = 200): IdempotencyRow | undefined {
          const entry = byRequest.get(request);
          return entry && rowOf(entry, status, serialize(request, status, body));
        },
      };
    },

    /** Counts the keys again, expired ones purged: the table was replaced (a restore). */
    recount: purge,

    close(): void {
      clearInterval(purger);
    },
  };
}
export type Idempotency = ReturnType<typeof createIdempotency>;

/** Keys are the caller's own: an agent's (its API key) ... */
export const byAgent = (request: FastifyRequest): string => `agent:${callerOf(request).agent_id}`;
/**
 * ... or the admin token's (by its hash): a sandbox served again under another token
 * (`serve --admin-token`) does not hand the old token's answers, node keys among them, to
 * the new one's holder. The admin token's keys are not bounded per caller (a seed file makes
 * thousands of admin writes); `outlivesRestore` for writes a restore does not undo.
 */
export function adminKeyed(
  keys: Idempotency,
  adminTokenHash: string,
  options: { outlivesRestore?: boolean } = {},
) {
  const scope = () => `admin:${adminTokenHash}`;
  return <H extends Handler>(handler: H): H =>
    keys.keyed(scope, handler, { perCaller: false, ...options });
}

/**
 * 2xx, and the 4xx of a write that ran but those that say to try again; of the 5xx, only a
 * transaction that was mined and reverted (its outcome is known and final).
 */
function storable(status: number, error: unknown): boolean {
  if (status >= 200 && status < 300) return true;
  if (status >= 400 && status < 500) return !UNSTORED.has(status);
  return status === 502 && hasMinedTx(error);
}

function hasMinedTx(error: unknown): boolean {
  return typeof (error as { txHash?: unknown } | undefined)?.txHash === 'string';
}

function mismatch(): HttpError {
  return new HttpError(
    422,
    'this Idempotency-Key was used for another request (another body or route); use a new key for a new request',
  );
}

/** The body as the route's response schema sends it (what the zod serializer does). */
function serialize(request: FastifyRequest, status: number, body: unknown): string {
  const schemas = request.routeOptions.schema?.response as Record<string, z.ZodType> | undefined;
  const schema = schemas?.[String(status)];
  return JSON.stringify(schema ? schema.parse(body) : body);
}

/**
 * SHA-256 of the method, the route (its pattern and parameters) and the body as the route
 * reads it, keys sorted: a route without a body schema (the faucet, a restore) reads none.
 */
function fingerprintOf(request: FastifyRequest): string {
  const readsBody = request.routeOptions.schema?.body !== undefined;
  return sha256(
    canonicalJson([
      request.method,
      request.routeOptions.url ?? '',
      request.params ?? null,
      readsBody ? (request.body ?? null) : null,
    ]),
  );
}

/** JSON with every object's keys sorted, so that the same body always hashes the same. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, item]) => item !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([name, item]) => `${JSON.stringify(name)}:${canonicalJson(item)}`).join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

function sha256(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

/**
 * AES-256-GCM under a key derived (HKDF-SHA-256) from the idempotency key and its scope, bound
 * to the row's id: what is on disk reveals no answer (a new API key, say) to whoever lacks the
 * idempotency key. Stored as IV (12 bytes), tag (16 bytes), ciphertext.
 */
function answerKey(entry: Pick<Running, 'scope' | 'key'>): Buffer {
  return Buffer.from(hkdfSync('sha256', entry.key, entry.scope, ANSWER_KEY_INFO, 32));
}

function seal(entry: Pick<Running, 'id' | 'scope' | 'key'>, text: string): Uint8Array {
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', answerKey(entry), iv);
  cipher.setAAD(Buffer.from(entry.id));
  const sealed = Buffer.concat([cipher.update(text, 'utf8'), cipher.final()]);
  return Buffer.concat([iv, cipher.getAuthTag(), sealed]);
}

function open(entry: Pick<Running, 'id' | 'scope' | 'key'>, blob: Uint8Array): string {
  const bytes = Buffer.from(blob);
  try {
    const decipher = createDecipheriv('aes-256-gcm', answerKey(entry), bytes.subarray(0, 12));
    decipher.setAAD(Buffer.from(entry.id));
    decipher.setAuthTag(bytes.subarray(12, 28));
    return Buffer.concat([decipher.update(bytes.subarray(28)), decipher.final()]).toString('utf8');
  } catch {
    throw new HttpError(
      422,
      "this Idempotency-Key's stored answer cannot be read (the database was changed by hand?); use a new key",
    );
  }
}
