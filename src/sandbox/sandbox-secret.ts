import { createCipheriv, createDecipheriv, randomBytes, scrypt } from 'node:crypto';
import { StartupError } from './errors.ts';

/**
 * AGENTCTL_SANDBOX_SECRET: the secret a sandbox kept in a database (`serve --database`) seals
 * its wallet mnemonic with, so that the database (and its backups) never holds the phrase
 * itself. Whoever starts a writer on that database gives it; nothing stores or prints it.
 *
 * The key is derived with scrypt from the secret and a random salt kept beside the sealed value
 * (the secret may be a passphrase, not a random key), and seals with AES-256-GCM: a different
 * secret fails the tag, so it is refused rather than read as another mnemonic. All of it is
 * node:crypto's.
 */
export const SANDBOX_SECRET_ENV = 'AGENTCTL_SANDBOX_SECRET';
/** Fewer characters than this are refused: the secret alone guards the wallets of a backup. */
export const SANDBOX_SECRET_MIN_LENGTH = 16;

/** How a value is sealed: named in its row, so that another scheme can be told apart later. */
export const SEAL_SCHEME = 'scrypt-n32768-r8-p1/aes-256-gcm';
const SCRYPT = { N: 32_768, r: 8, p: 1, maxmem: 64 * 1024 * 1024 };
const KEY_BYTES = 32;
const SALT_BYTES = 16;
const IV_BYTES = 12;
const TAG_BYTES = 16;

export interface Sealed {
  scheme: string;
  salt: Uint8Array;
  iv: Uint8Array;
  tag: Uint8Array;
  ciphertext: Uint8Array;
}

/**
 * The secret from the environment; a StartupError naming the variable when it is missing or
 * too short (never saying its value).
 */
export function sandboxSecret(env: NodeJS.ProcessEnv = process.env): string {
  const secret = env[SANDBOX_SECRET_ENV];
  if (secret === undefined || secret === '') {
    throw new StartupError(
      `${SANDBOX_SECRET_ENV} is not set: a sandbox kept in a database seals its wallet mnemonic with it; ` +
        'set it to the secret this sandbox was created with (for a new sandbox, a new random one, e.g. `openssl rand -base64 32`)',
    );
  }
  if (secret.length < SANDBOX_SECRET_MIN_LENGTH) {
    throw new StartupError(
      `${SANDBOX_SECRET_ENV} is too short (${secret.length} characters): use at least ${SANDBOX_SECRET_MIN_LENGTH}, ` +
        'e.g. `openssl rand -base64 32`',
    );
  }
  return secret;
}

function deriveKey(secret: string, salt: Uint8Array): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    scrypt(secret, salt, KEY_BYTES, SCRYPT, (error, key) => (error ? reject(error) : resolve(key)));
  });
}

/** `plaintext` sealed under `secret`, bound to `context` (what it is: a wrong row is refused). */
export async function seal(secret: string, plaintext: string, context: string): Promise<Sealed> {
  const salt = randomBytes(SALT_BYTES);
  const iv = randomBytes(IV_BYTES);
  const cipher = createCipheriv('aes-256-gcm', await deriveKey(secret, salt), iv, {
    authTagLength: TAG_BYTES,
  });
  cipher.setAAD(Buffer.from(context));
  const ciphertext = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
  return { scheme: SEAL_SCHEME, salt, iv, tag: cipher.getAuthTag(), ciphertext };
}

/**
 * What seal() sealed, or undefined when `secret` is not the one it was sealed with (or the
 * value was changed): the caller says which secret and what to do.
 */
export async function unseal(
  secret: string,
  sealed: Sealed,
  context: string,
): Promise<string | undefined> {
  if (sealed.scheme !== SEAL_SCHEME) {
    throw new StartupError(
      `a value in the database is sealed with ${JSON.stringify(sealed.scheme)}, which this agentctl does not know; upgrade agentctl`,
    );
  }
  const key = await deriveKey(secret, sealed.salt);
  try {
    // The tag's length is fixed: a shorter one would be easier to forge.
    const decipher = createDecipheriv('aes-256-gcm', key, sealed.iv, { authTagLength: TAG_BYTES });
    decipher.setAAD(Buffer.from(context));
    decipher.setAuthTag(sealed.tag);
    return Buffer.concat([decipher.update(sealed.ciphertext), decipher.final()]).toString('utf8');
  } catch {
    return undefined;
  }
}
