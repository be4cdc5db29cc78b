import { createHash } from 'node:crypto';
import {
  chmodSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  statSync,
  unlinkSync,
  utimesSync,
} from 'node:fs';
import { join } from 'node:path';
import { writeFileAtomically } from '../files/atomic.ts';

/** How many registrations are kept at most; the oldest is dropped for another. */
export const MAX_PENDING_REGISTRATIONS = 32;
/** The sandbox keeps a key's answer 24 h (docs/idempotency.md): a body older is of no use. */
export const PENDING_REGISTRATION_TTL_MS = 24 * 60 * 60 * 1000;

/** A signed registration sent under a key whose outcome is not known yet. */
export interface PendingRegistration {
  /** The service's scheme://host:port. */
  origin: string;
  /** The registering wallet, lower case. */
  wallet: string;
  /** When it was kept (ms since the epoch). */
  savedAtMs: number;
  /** The request's body as it was sent: the fields, the nonce and its signature. */
  body: Record<string, unknown>;
}

/**
 * Signed registrations kept until their outcome is known (`register`, `sandbox seed`), so
 * that a rerun with the same Idempotency-Key sends the same request, which a service that
 * honours keys answers with what it did, the one-time API key included. Signing anew would
 * make another request under that key: refused (422).
 *
 * One file per registration in `pending-registrations/` of the config dir (0700), named by a
 * hash of the service's origin, the wallet and the key (the key itself is never in a name),
 * mode 0600, written atomically. A body holds a nonce and its signature, never a private key;
 * still, it is never printed. At most MAX_PENDING_REGISTRATIONS are kept (the oldest dropped),
 * and none older than the service keeps its answers. `now` is injectable for tests.
 */
export function openPendingRegistrations(configDir: string, now: () => number = Date.now) {
  const dir = join(configDir, 'pending-registrations');
  const pathOf = (origin: string, wallet: string, key: string) =>
    join(
      dir,
      `${createHash('sha256')
        .update(JSON.stringify([origin, wallet.toLowerCase(), key]))
        .digest('hex')}.json`,
    );
  const expired = (savedAtMs: number) => now() - savedAtMs >= PENDING_REGISTRATION_TTL_MS;

  /** The kept files, oldest first; expired ones are removed on the way. */
  function keptFiles(): Array<{ path: string; savedAtMs: number }> {
    let names: string[];
    try {
      names = readdirSync(dir);
    } catch {
      return [];
    }
    const files = [];
    for (const name of names) {
      if (!/^[0-9a-f]{64}\.json$/.test(name)) continue;
      const path = join(dir, name);
      let savedAtMs: number;
      try {
        savedAtMs = statSync(path).mtimeMs;
      } catch {
        continue;
      }
      if (expired(savedAtMs)) removeFile(path);
      else files.push({ path, savedAtMs });
    }
    return files.sort((a, b) => a.savedAtMs - b.savedAtMs);
  }

  return {
    dir,
    /** The registration kept for this service, wallet and key; undefined if none (or expired). */
    find(origin: string, wallet: string, key: string): PendingRegistration | undefined {
      const path = pathOf(origin, wallet, key);
      let savedAtMs: number;
      let text: string;
      try {
        savedAtMs = statSync(path).mtimeMs;
        text = readFileSync(path, 'utf8');
      } catch {
        return undefined;
      }
      if (expired(savedAtMs)) {
        removeFile(path);
        return undefined;
      }
      const kept = parse(text);
      // A damaged file, or one of another service or wallet, is no one's to send.
      if (kept?.origin !== origin || kept.wallet !== wallet.toLowerCase()) return undefined;
      return { ...kept, savedAtMs };
    },
    /** Keeps a registration before its first try, making room by dropping the oldest. */
    save(origin: string, wallet: string, key: string, body: Record<string, unknown>): void {
      mkdirSync(dir, { recursive: true, mode: 0o700 });
      chmodSync(dir, 0o700); // whatever the umask, or an older dir, left of it
      const path = pathOf(origin, wallet, key);
      const others = keptFiles().filter((file) => file.path !== path);
      for (const file of others.slice(
        0,
        Math.max(0, others.length - MAX_PENDING_REGISTRATIONS + 1),
      )) {
        removeFile(file.path);
      }
      writeFileAtomically(
        path,
        `${JSON.stringify({ version: 1, origin, wallet: wallet.toLowerCase(), body })}\n`,
      );
      // Its age is its modification time, set by this clock (a test's too).
      const at = new Date(now());
      utimesSync(path, at, at);
    },
    /** Forgets a registration whose outcome is known. */
    remove(origin: string, wallet: string, key: string): void {
      removeFile(pathOf(origin, wallet, key));
    },
  };
}
export type PendingRegistrations = ReturnType<typeof openPendingRegistrations>;

function removeFile(path: string): void {
  try {
    unlinkSync(path);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  }
}

function parse(text: string): Omit<PendingRegistration, 'savedAtMs'> | undefined {
  try {
    const data = JSON.parse(text) as Record<string, unknown> | null;
    const body = data?.body;
    if (
      typeof data?.origin !== 'string' ||
      typeof data.wallet !== 'string' ||
      typeof body !== 'object' ||
      body === null ||
      Array.isArray(body)
    ) {
      return undefined;
    }
    return { origin: data.origin, wallet: data.wallet, body: body as Record<string, unknown> };
  } catch {
    return undefined;
  }
}
