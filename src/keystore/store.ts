import {
  chmodSync,
  existsSync,
  linkSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmSync,
  unlinkSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { checksumAddress } from '../api/schemas/checksum.ts';

/** Keystore names: safe as file names, and short. */
export const KEY_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

/** A key-handling failure; `kind` says whether it is bad input or a failed unlock. */
export class KeystoreError extends Error {
  readonly kind: 'usage' | 'auth';

  constructor(message: string, kind: 'usage' | 'auth' = 'usage') {
    super(message);
    this.name = 'KeystoreError';
    this.kind = kind;
  }
}

export interface KeystoreEntry {
  name: string;
  /** EIP-55 checksummed. */
  address: string;
  path: string;
}

/**
 * Web3 Secret Storage v3 files (scrypt), one per key, in `dir` (0700) with mode 0600.
 * Encryption and decryption are @ethereumjs/wallet's; nothing here touches key material
 * beyond handing it over.
 */
export function openKeystoreDir(dir: string) {
  const pathOf = (name: string) => {
    if (!KEY_NAME.test(name)) {
      throw new KeystoreError(
        `key name ${JSON.stringify(name)}: use letters, digits, dot, dash or underscore (at most 64)`,
      );
    }
    return join(dir, `${name}.json`);
  };
  const read = (name: string): Record<string, unknown> => {
    const path = pathOf(name);
    if (!existsSync(path))
      throw new KeystoreError(`no key named ${name} (see \`agentctl keys list\`)`);
    try {
      return JSON.parse(readFileSync(path, 'utf8'));
    } catch {
      throw new KeystoreError(`${path} is not a keystore file`);
    }
  };

  return {
    dir,
    pathOf,
    exists: (name: string) => existsSync(pathOf(name)),
    /** Encrypts `privateKey` into a new file. An existing key of that name is never replaced. */
    async create(name: string, privateKey: Uint8Array, password: string): Promise<KeystoreEntry> {
      const path = pathOf(name);
      if (existsSync(path))
        throw new KeystoreError(`a key named ${name} already exists; choose another name`);
      const { Wallet } = await import('@ethereumjs/wallet');
      const wallet = Wallet.fromPrivateKey(privateKey);
      const json = await wallet.toV3String(password, { kdf: 'scrypt' });
      mkdirSync(dir, { recursive: true, mode: 0o700 });
      chmodSync(dir, 0o700);
      // Temp file, then a hard link: the link fails if the name appeared meanwhile, so a
      // key is never overwritten, and readers never see a half-written file.
      const temp = join(dir, `.${name}.${process.pid}.tmp`);
      writeFileSync(temp, json, { mode: 0o600 });
      try {
        linkSync(temp, path);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === 'EEXIST') {
          throw new KeystoreError(`a key named ${name} already exists; choose another name`);
        }
        throw error;
      } finally {
        unlinkSync(temp);
      }
      return { name, address: checksumAddress(wallet.getAddressString()), path };
    },
    list(): KeystoreEntry[] {
      if (!existsSync(dir)) return [];
      return readdirSync(dir)
        .filter((file) => file.endsWith('.json') && !file.startsWith('.'))
        .map((file) => file.slice(0, -'.json'.length))
        .filter((name) => KEY_NAME.test(name))
        .sort()
        .map((name) => {
          const address = read(name).address;
          return {
            name,
            address:
              typeof address === 'string'
                ? checksumAddress(`0x${address.replace(/^0x/, '')}`)
                : '?',
            path: pathOf(name),
          };
        });
    },
    address(name: string): string {
      const address = read(name).address;
      if (typeof address !== 'string')
        throw new KeystoreError(`${pathOf(name)} records no address`);
      return checksumAddress(`0x${address.replace(/^0x/, '')}`);
    },
    /** The private key, or a KeystoreError for a wrong password. */
    async decrypt(name: string, password: string): Promise<Uint8Array> {
      const json = read(name);
      const { Wallet } = await import('@ethereumjs/wallet');
      try {
        return (await Wallet.fromV3(json as never, password)).getPrivateKey();
      } catch (error) {
        const message = (error as Error).message;
        throw new KeystoreError(
          /passphrase|password|mac/i.test(message)
            ? `wrong password for key ${name}`
            : `cannot decrypt key ${name}: ${message}`,
          'auth',
        );
      }
    },
    remove(name: string): void {
      read(name);
      rmSync(pathOf(name));
    },
  };
}
export type KeystoreDir = ReturnType<typeof openKeystoreDir>;
