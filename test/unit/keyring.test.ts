import { mnemonicToSeedSync } from '@scure/bip39';
import { english, generateMnemonic, mnemonicToAccount } from 'viem/accounts';
import { describe, expect, it } from 'vitest';
import { createKeyring, mnemonicSeed } from '../../src/sandbox/chain/wallets.ts';

describe('the sandbox keyring', () => {
  it('computes the BIP-39 seed exactly as @scure/bip39 does', () => {
    for (let i = 0; i < 3; i++) {
      const mnemonic = generateMnemonic(english, 256);
      expect(Buffer.from(mnemonicSeed(mnemonic)).toString('hex')).toBe(
        Buffer.from(mnemonicToSeedSync(mnemonic)).toString('hex'),
      );
    }
  });

  it('derives the same accounts as viem’s mnemonicToAccount', () => {
    const mnemonic = generateMnemonic(english, 256);
    const keyring = createKeyring(mnemonic);
    for (const index of [0, 1, 1000, 1001, 4242]) {
      expect(keyring(index).address).toBe(
        mnemonicToAccount(mnemonic, { addressIndex: index }).address,
      );
    }
  });
});
