import { StartupError } from '../errors.ts';
import type { Store } from '../store/index.ts';
import { createMnemonic, mnemonicFingerprint, mnemonicPath, readMnemonic } from './wallets.ts';

/**
 * wallet.mnemonic, created with a new sandbox and checked against the database ever after:
 * every agent's wallet derives from it, so a missing or swapped file is refused.
 */
export async function openMnemonic(stateDir: string, store: Store): Promise<string> {
  const fingerprint = await store.meta.get('mnemonic_fingerprint');
  const mnemonic = readMnemonic(stateDir);
  if (fingerprint === undefined) {
    const created = mnemonic ?? createMnemonic(stateDir);
    await store.meta.set('mnemonic_fingerprint', mnemonicFingerprint(created));
    return created;
  }
  if (mnemonic === undefined) {
    throw new StartupError(
      `${mnemonicPath(stateDir)} is missing, but every agent wallet of this sandbox derives from it; ` +
        'restore it from a backup of this state directory',
    );
  }
  if (mnemonicFingerprint(mnemonic) !== fingerprint) {
    throw new StartupError(
      `${mnemonicPath(stateDir)} is not the mnemonic this sandbox was created with; ` +
        'restore the original from a backup of this state directory',
    );
  }
  return mnemonic;
}
