import type { ApiClient, WriteKey, WriteResponse } from '../api/client.ts';
import { ApiError, UnexpectedResponseError } from '../api/errors.ts';
import type { RegisterResponse } from '../api/schemas/index.ts';
import type { PendingRegistration, PendingRegistrations } from '../config/pending-registrations.ts';

/** What signs a registration: a viem account (a keystore's, a private key's, a mnemonic's). */
export interface RegistrationSigner {
  address: string;
  signMessage(args: { message: string }): Promise<string>;
}

/** Where signed registrations are kept until their outcome is known, and what is said of it. */
export interface KeptRegistrations {
  store: PendingRegistrations;
  /** Said (one line, stderr) when an earlier run's registration is sent instead of a new one. */
  onResend(text: string): void;
  /** Said when a signed registration could not be kept: it is sent all the same. */
  onKeepFailed(text: string): void;
  /**
   * When set, a registration answered 2xx is kept until the caller calls `forget`, not dropped
   * at once: a seed run keeps its agents' requests until the whole run is done, so that the
   * run made again with its key, after a later step's outcome was unknown, sends each again
   * (answered as it was, the API key included) rather than a new one under the same key (422).
   */
  keepAnswered?(forget: () => void): void;
}

/**
 * A registration about to be sent: the key of its write (taken now, so that the request can
 * be kept under it before its first try), and the request an earlier run kept under that key
 * for this service and wallet, if any.
 */
export interface PreparedRegistration {
  key: WriteKey;
  wallet: string;
  kept: PendingRegistration | undefined;
}

/** Takes the registration's key, and finds what an earlier run kept under it. */
export function prepareRegistration(
  client: ApiClient,
  wallet: string,
  kept: KeptRegistrations | undefined,
): PreparedRegistration {
  const key = client.nextWriteKey();
  let found: PendingRegistration | undefined;
  try {
    found = kept?.store.find(client.origin, wallet, key.key);
  } catch {
    // An unreadable dir: nothing to send again; signing anew is what happens without one.
  }
  return { key, wallet, kept: found };
}

/**
 * Sends a prepared registration. When an earlier run kept one under the same key for this
 * service and wallet, that request is sent again as it was (said on stderr, never shown):
 * a service that honours keys answers it with what it did, the API key included. Otherwise
 * the handshake: a nonce for the wallet, its message signed (EIP-191), and the registration
 * with `fields`, kept under its key before its first try until an answer says what happened.
 *
 * The answer is returned as received: its one-time API key must never be lost to a shape
 * check (see apiKeyOf).
 */
export async function sendRegistration(
  client: ApiClient,
  prepared: PreparedRegistration,
  signer: RegistrationSigner,
  fields: Record<string, unknown>,
  kept: KeptRegistrations | undefined,
): Promise<WriteResponse<RegisterResponse>> {
  const { key, wallet } = prepared;
  let body: Record<string, unknown>;
  if (prepared.kept) {
    body = prepared.kept.body;
    kept?.onResend(
      `sending the registration of ${wallet} kept for this Idempotency-Key since ${clockTime(prepared.kept.savedAtMs)} again, not signing a new one`,
    );
  } else {
    const nonce = await client.nonce(signer.address);
    const signature = await signer.signMessage({ message: nonce.data.message });
    body = { ...fields, wallet_address: signer.address, nonce: nonce.data.nonce, signature };
    try {
      kept?.store.save(client.origin, wallet, key.key, body);
    } catch (error) {
      kept?.onKeepFailed(
        `could not keep the signed registration (${(error as Error).message}): should its outcome be unknown, a rerun with its key cannot recover the API key`,
      );
    }
  }
  const forget = () => {
    try {
      kept?.store.remove(client.origin, wallet, key.key);
    } catch {
      // Left for the bound and the 24 h expiry to clear.
    }
  };
  try {
    const response = await client.register(body, key);
    if (kept?.keepAnswered) kept.keepAnswered(forget);
    else forget();
    return response;
  } catch (error) {
    // Kept while what happened is unknown (a lost answer, a 5xx, nothing sent yet, a rate
    // limit that kept this try from running): only an answer of the service's own says it.
    const answered =
      (error instanceof ApiError && error.status !== 429) ||
      error instanceof UnexpectedResponseError;
    if (!answered) throw error;
    forget();
    if (prepared.kept && error instanceof ApiError && error.status === 401) {
      throw new ApiError(
        401,
        {
          ...error.body,
          error: `${error.message}; the registration kept from an earlier run was not done, and is dropped: the same command run again signs a new one`,
        },
        error.authenticated,
      );
    }
    throw error;
  }
}

/**
 * The registration handshake in one go (seed files): prepareRegistration, then
 * sendRegistration.
 */
export async function signAndRegister(
  client: ApiClient,
  signer: RegistrationSigner,
  fields: Record<string, unknown>,
  kept?: KeptRegistrations,
): Promise<WriteResponse<RegisterResponse>> {
  const prepared = prepareRegistration(client, signer.address, kept);
  return sendRegistration(client, prepared, signer, fields, kept);
}

/** The API key in a registration's answer, whatever else its shape; undefined when none. */
export function apiKeyOf(response: { data: unknown }): string | undefined {
  const apiKey = (response.data as { api_key?: unknown } | null)?.api_key;
  return typeof apiKey === 'string' && apiKey !== '' ? apiKey : undefined;
}

/** "2026-11-26 16:20:03 UTC". */
function clockTime(ms: number): string {
  return `${new Date(ms).toISOString().slice(0, 19).replace('T', ' ')} UTC`;
}
