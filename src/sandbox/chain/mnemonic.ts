import { validateMnemonic } from '@scure/bip39';
import { wordlist } from '@scure/bip39/wordlists/english';
import { english, generateMnemonic } from 'viem/accounts';
import { StartupError } from '../errors.ts';
import { SANDBOX_SECRET_ENV, type Sealed, sandboxSecret, seal, unseal } from '../sandbox-secret.ts';
import type { Store } from '../store/index.ts';
import type { Sql, SqlBackend } from '../store/sql.ts';
import { createMnemonic, mnemonicFingerprint, mnemonicPath, readMnemonic } from './wallets.ts';

/**
 * Where the sandbox's HD mnemonic is kept: wallet.mnemonic in the state dir (0600, the
 * default), or sealed in the database (`serve --database`) under AGENTCTL_SANDBOX_SECRET.
 * Every agent's wallet derives from it; nothing prints or logs it.
 */
export interface MnemonicStore {
  /** The mnemonic kept, or undefined when there is none yet; refuses one it cannot read. */
  read(): Promise<string | undefined>;
  /**
   * Makes and keeps a new sandbox's mnemonic (`given`, for a sandbox started from an export:
   * its wallets derive from it); resolves with the one kept (never replaced).
   */
  create(given?: string): Promise<string>;
  /** Why a start is refused: the mnemonic is `missing`, or `swapped` for another. */
  refusal(why: 'missing' | 'swapped'): string;
}

/**
 * The mnemonic, created with a new sandbox and checked against the database ever after:
 * every agent's wallet derives from it, so a missing or swapped one is refused.
 */
export async function openMnemonic(mnemonics: MnemonicStore, store: Store): Promise<string> {
  const fingerprint = await store.meta.get('mnemonic_fingerprint');
  const mnemonic = await mnemonics.read();
  if (fingerprint === undefined) {
    const created = mnemonic ?? (await mnemonics.create());
    await store.meta.set('mnemonic_fingerprint', mnemonicFingerprint(created));
    return created;
  }
  if (mnemonic === undefined) throw new StartupError(mnemonics.refusal('missing'));
  if (mnemonicFingerprint(mnemonic) !== fingerprint) {
    throw new StartupError(mnemonics.refusal('swapped'));
  }
  return mnemonic;
}

/** wallet.mnemonic in the state dir: written once (0600, fsynced), never replaced. */
export function directoryMnemonic(stateDir: string): MnemonicStore {
  return {
    read: async () => readMnemonic(stateDir),
    create: async (given) => createMnemonic(stateDir, given),
    refusal: (why) =>
      why === 'missing'
        ? `${mnemonicPath(stateDir)} is missing, but every agent wallet of this sandbox derives from it; ` +
          'restore it from a backup of this state directory'
        : `${mnemonicPath(stateDir)} is not the mnemonic this sandbox was created with; ` +
          'restore the original from a backup of this state directory',
  };
}

/** What the sealed value is, bound into its seal: a value sealed for anything else is refused. */
const MNEMONIC_CONTEXT = 'agentctl wallet mnemonic';

interface SealedRow {
  scheme: string;
  salt: Uint8Array;
  iv: Uint8Array;
  tag: Uint8Array;
  ciphertext: Uint8Array;
}

/**
 * The mnemonic in the database's wallet_mnemonic table (one row; PostgreSQL), sealed under
 * AGENTCTL_SANDBOX_SECRET (sandbox-secret.ts): the database and its backups never hold the
 * phrase. Without the variable, or with another secret than the one it was sealed with, the
 * start is refused.
 */
export interface DatabaseMnemonicStore extends MnemonicStore {
  /**
   * Keeps `mnemonic` (an export's) inside `tx`, the import's transaction: the import and its
   * mnemonic go in together, or neither. Resolves with the one kept, which is another when the
   * database held one already.
   */
  keepWithin(tx: Sql, mnemonic: string): Promise<string>;
}

export function databaseMnemonic(
  sql: SqlBackend,
  env: NodeJS.ProcessEnv = process.env,
): DatabaseMnemonicStore {
  const where = 'the wallet mnemonic in the database (wallet_mnemonic)';
  const read = () => readOn(sql);
  async function readOn(on: Sql): Promise<string | undefined> {
    const secret = sandboxSecret(env);
    const row = await on.get<SealedRow>(
      'SELECT scheme, salt, iv, tag, ciphertext FROM wallet_mnemonic',
    );
    if (!row) return undefined;
    const mnemonic = await unseal(secret, row as Sealed, MNEMONIC_CONTEXT);
    if (mnemonic === undefined) {
      throw new StartupError(
        `${SANDBOX_SECRET_ENV} does not decrypt ${where}: it is not the secret this sandbox was created with; ` +
          'start with that one',
      );
    }
    if (!validateMnemonic(mnemonic, wordlist)) {
      throw new StartupError(
        `${where} is not a valid BIP-39 mnemonic; restore the database from a backup`,
      );
    }
    return mnemonic;
  }
  /**
   * Seals `mnemonic` and puts it in on `on` unless a row is there; resolves with the one kept:
   * `mnemonic` when its row went in (not unsealed again: one scrypt less), else the other.
   */
  async function keep(on: Sql, mnemonic: string): Promise<string> {
    const sealed = await seal(sandboxSecret(env), mnemonic, MNEMONIC_CONTEXT);
    // Another writer that created one first keeps its own: the row is never replaced.
    await on.run(
      `INSERT INTO wallet_mnemonic (one, scheme, salt, iv, tag, ciphertext)
       VALUES (true, ?, ?, ?, ?, ?) ON CONFLICT (one) DO NOTHING`,
      sealed.scheme,
      sealed.salt,
      sealed.iv,
      sealed.tag,
      sealed.ciphertext,
    );
    const row = await on.get<{ salt: Uint8Array }>('SELECT salt FROM wallet_mnemonic');
    if (row && Buffer.from(row.salt).equals(Buffer.from(sealed.salt))) return mnemonic;
    const kept = await readOn(on);
    if (kept === undefined) throw new Error(`${where} was not kept`);
    return kept;
  }
  return {
    read,
    create: (given) => keep(sql, given ?? generateMnemonic(english, 256)),
    keepWithin: keep,
    refusal: (why) =>
      why === 'missing'
        ? `${where} is missing, but every agent wallet of this sandbox derives from it; restore the database from a backup`
        : `${where} is not the mnemonic this sandbox was created with; restore the database from a backup`,
  };
}
