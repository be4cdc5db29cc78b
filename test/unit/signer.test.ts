import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resolveSigner } from '../../src/keystore/signer.ts';
import { type KeystoreDir, openKeystoreDir } from '../../src/keystore/store.ts';

let dir: string;
let store: KeystoreDir;
const keys = {
  flag: generatePrivateKey(),
  profile: generatePrivateKey(),
  env: generatePrivateKey(),
};
const address = (key: `0x${string}`) => privateKeyToAccount(key).address;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'agentctl-signer-'));
  store = openKeystoreDir(join(dir, 'keystores'));
  await store.create('flag', Buffer.from(keys.flag.slice(2), 'hex'), 'password-1');
  await store.create('profile', Buffer.from(keys.profile.slice(2), 'hex'), 'password-1');
}, 60_000);
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('resolveSigner precedence', () => {
  const env = { AGENTCTL_PRIVATE_KEY: keys.env, AGENTCTL_KEYSTORE_PASSWORD: 'password-1' };

  it('--key beats AGENTCTL_PRIVATE_KEY, which beats the profile keystore', async () => {
    const all = { keyName: 'flag', profileKeystore: 'profile', env, keystores: store };
    expect((await resolveSigner(all)).account.address).toBe(address(keys.flag));
    const noFlag = { ...all, keyName: undefined };
    expect(await resolveSigner(noFlag)).toMatchObject({ source: 'AGENTCTL_PRIVATE_KEY' });
    const profileOnly = { ...noFlag, env: { AGENTCTL_KEYSTORE_PASSWORD: 'password-1' } };
    const resolved = await resolveSigner(profileOnly);
    expect(resolved.account.address).toBe(address(keys.profile));
    expect(resolved.keystore).toBe('profile');
  }, 60_000);

  it('takes the password from --password-file before the environment, then a prompt', async () => {
    const file = join(dir, 'pw');
    writeFileSync(file, 'password-1\nignored second line');
    const fromFile = await resolveSigner({
      keyName: 'flag',
      env: { AGENTCTL_KEYSTORE_PASSWORD: 'wrong' },
      passwordFile: file,
      keystores: store,
    });
    expect(fromFile.account.address).toBe(address(keys.flag));
    const asked: string[] = [];
    const prompted = await resolveSigner({
      keyName: 'flag',
      env: {},
      keystores: store,
      askPassword: async (message) => {
        asked.push(message);
        return 'password-1';
      },
    });
    expect(prompted.account.address).toBe(address(keys.flag));
    expect(asked).toEqual(['Password for key flag']);
  }, 60_000);

  it('lists every option when nothing is available, and never echoes a bad key', async () => {
    await expect(resolveSigner({ env: {}, keystores: store })).rejects.toThrow(
      /--key NAME.*AGENTCTL_PRIVATE_KEY.*profile/,
    );
    const secret = 'zz'.repeat(32);
    const error = await resolveSigner({
      env: { AGENTCTL_PRIVATE_KEY: secret },
      keystores: store,
    }).catch((e) => e);
    expect(error.message).toContain('64 hex digits');
    expect(error.message).not.toContain(secret);
    await expect(resolveSigner({ keyName: 'flag', env: {}, keystores: store })).rejects.toThrow(
      'no keystore password',
    );
  });
});
