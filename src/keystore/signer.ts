import type { Hex, PrivateKeyAccount } from 'viem';
import { readOptionFile } from './files.ts';
import { type KeystoreDir, KeystoreError } from './store.ts';

/** Everything a signer may come from, in the order resolveSigner tries them. */
export interface SignerSources {
  /** `--key NAME`: a keystore. */
  keyName?: string;
  /** The profile's keystore, remembered by `register`. */
  profileKeystore?: string;
  env: NodeJS.ProcessEnv;
  /** `--password-file FILE`. */
  passwordFile?: string;
  keystores: KeystoreDir;
  /** A hidden prompt, when prompting is allowed; undefined otherwise. */
  askPassword?: (message: string) => Promise<string>;
  /** Runs a keystore's decryption (a second or two of scrypt), e.g. under a spinner. */
  unlocking?: <T>(name: string, work: () => Promise<T>) => Promise<T>;
}

export interface ResolvedSigner {
  account: PrivateKeyAccount;
  /** Where it came from, for messages: "keystore NAME" or "AGENTCTL_PRIVATE_KEY". */
  source: string;
  keystore?: string;
}

export const SIGNER_OPTIONS =
  'pass --key NAME (a keystore made by `agentctl keys new` or `keys import`), ' +
  'set AGENTCTL_PRIVATE_KEY (unsafe: for CI only), ' +
  'or use a profile whose keystore `agentctl register` remembered';

/**
 * The one place that picks the signing key. Precedence:
 * 1. `--key NAME` (a keystore), 2. `AGENTCTL_PRIVATE_KEY`, 3. the profile's keystore.
 * A keystore's password comes from `--password-file`, then `AGENTCTL_KEYSTORE_PASSWORD`,
 * then a hidden prompt. When nothing is available, the error lists every option.
 */
export async function resolveSigner(sources: SignerSources): Promise<ResolvedSigner> {
  const { privateKeyToAccount } = await import('viem/accounts');
  if (sources.keyName) return unlock(sources, sources.keyName, privateKeyToAccount);
  const raw = sources.env.AGENTCTL_PRIVATE_KEY;
  if (raw) {
    const key = raw.trim().replace(/^(0x)?/, '0x');
    if (!/^0x[0-9a-fA-F]{64}$/.test(key)) {
      // Never echo the value: it is a secret even when malformed.
      throw new KeystoreError('AGENTCTL_PRIVATE_KEY must be 32 bytes: 64 hex digits, 0x optional');
    }
    return { account: privateKeyToAccount(key as Hex), source: 'AGENTCTL_PRIVATE_KEY' };
  }
  if (sources.profileKeystore) return unlock(sources, sources.profileKeystore, privateKeyToAccount);
  throw new KeystoreError(`no signing key: ${SIGNER_OPTIONS}`);
}

/** Tries a typed password gets before the unlock fails (a file or variable gets one). */
export const PASSWORD_TRIES = 3;

async function unlock(
  sources: SignerSources,
  name: string,
  toAccount: (key: Hex) => PrivateKeyAccount,
): Promise<ResolvedSigner> {
  sources.keystores.address(name); // a missing keystore is reported before asking for its password
  const typed = !sources.passwordFile && !sources.env.AGENTCTL_KEYSTORE_PASSWORD;
  for (let attempt = 1; ; attempt++) {
    const password = await keystorePassword(sources, `Password for key ${name}`);
    try {
      const decrypt = () => sources.keystores.decrypt(name, password);
      const key = await (sources.unlocking ? sources.unlocking(name, decrypt) : decrypt());
      return {
        account: toAccount(`0x${Buffer.from(key).toString('hex')}`),
        source: `keystore ${name}`,
        keystore: name,
      };
    } catch (error) {
      const wrong = error instanceof KeystoreError && error.message.startsWith('wrong password');
      if (!wrong || !typed || !sources.askPassword || attempt >= PASSWORD_TRIES) throw error;
      process.stderr.write(`Wrong password for key ${name}; try again.\n`);
    }
  }
}

/** `--password-file`, then `AGENTCTL_KEYSTORE_PASSWORD`, then a hidden prompt. */
export async function keystorePassword(
  sources: Pick<SignerSources, 'env' | 'passwordFile' | 'askPassword'>,
  message: string,
): Promise<string> {
  if (sources.passwordFile) {
    const text = readOptionFile(
      '--password-file',
      sources.passwordFile,
      'the keystore password on its first line',
    );
    // The first line: files written by `echo` end with a newline that is not part of it.
    return text.split(/\r?\n/)[0] ?? '';
  }
  const fromEnv = sources.env.AGENTCTL_KEYSTORE_PASSWORD;
  if (fromEnv !== undefined && fromEnv !== '') return fromEnv;
  if (sources.askPassword) return sources.askPassword(message);
  throw new KeystoreError(
    'no keystore password: pass --password-file FILE, set AGENTCTL_KEYSTORE_PASSWORD, or run in a terminal to be asked',
  );
}
