import { createHash } from 'node:crypto';
import {
  getAddress,
  type Hex,
  parseSignature,
  recoverMessageAddress,
  serializeSignature,
} from 'viem';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  AGENT_FIELDS,
  admin,
  createTestSandbox,
  getNonce,
  newAccount,
  postRegister,
  register,
  registeredAgent,
  signedBody,
  storedText,
  type TestSandbox,
} from '../helpers/sandbox.ts';
import { rpcCall } from '../helpers/serve.ts';

const SECP256K1_N = 0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141n;

let sandbox: TestSandbox;
beforeEach(async () => {
  sandbox = await createTestSandbox();
});
afterEach(async () => {
  await sandbox.close();
});

describe('GET /api/v1/agent/auth/nonce', () => {
  it('issues a 256-bit hex nonce bound into an EIP-4361-style message', async () => {
    const account = newAccount();
    const response = await sandbox.app.inject({
      url: `/api/v1/agent/auth/nonce?wallet=${account.address.toLowerCase()}`,
      // The message names the service itself, never the Host a client claims.
      headers: { host: 'evil.example' },
    });
    expect(response.statusCode).toBe(200);
    const body = response.json();
    expect(body.expires_in_seconds).toBe(600);
    expect(body.nonce).toMatch(/^[0-9a-f]{64}$/);
    const lines = body.message.split('\n');
    // Not listening (inject), the service calls itself localhost; serve names its address.
    expect(lines[0]).toBe('localhost wants you to sign in with your Ethereum account:');
    expect(lines[1]).toBe(account.address);
    expect(body.message).toContain(`Nonce: ${body.nonce}`);
    expect(body.message).toContain('Chain ID: 84532');
    const issuedAt = Number(/Issued At: (\d+)/.exec(body.message)?.[1]);
    expect(Math.abs(issuedAt - Date.now() / 1000)).toBeLessThan(60);
  });

  it('never repeats a nonce', async () => {
    const wallet = newAccount().address;
    const nonces = new Set<string>();
    for (let i = 0; i < 20; i++) nonces.add((await getNonce(sandbox.app, wallet)).nonce);
    expect(nonces.size).toBe(20);
  });

  it.each([
    ['missing', ''],
    ['short', '?wallet=0x1234'],
    ['no 0x', `?wallet=${'a'.repeat(42)}`],
    ['bad checksum', '?wallet=0x000000000000000000000000000000000000DeaD'],
  ])('rejects a %s wallet with 400', async (_label, query) => {
    const response = await sandbox.app.inject({ url: `/api/v1/agent/auth/nonce${query}` });
    expect(response.statusCode).toBe(400);
    expect(response.json().error).toMatch(/^wallet: /);
  });
});

describe('POST /api/v1/agent/auth/register', () => {
  it('registers an agent and returns a one-time API key', async () => {
    const account = newAccount();
    const response = await register(sandbox.app, account);
    expect(response.statusCode).toBe(200);
    const body = response.json();
    expect(body).toMatchObject({ success: true, agent_name: 'Test Agent', tier: 'unverified' });
    expect(body.agent_id).toMatch(
      /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/,
    );
    expect(body.api_key).toMatch(/^agk_[0-9a-f]{64}$/);
    expect(body.api_key.startsWith(body.api_key_prefix)).toBe(true);
    expect(body.api_key_prefix.length).toBeLessThan(16);

    const lookup = await sandbox.app.inject({
      url: `/api/v1/agent/auth/lookup?wallet=${account.address}`,
    });
    expect(lookup.json()).toMatchObject({
      registered: true,
      agent_name: 'Test Agent',
      tier: 'unverified',
      status: 'active',
      strategies_submitted: 0,
      performance_score: 0,
      api_key_prefix: body.api_key_prefix,
    });
    expect(lookup.json().created_at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    expect(lookup.json()).not.toHaveProperty('api_key');
  });

  it('stores only a SHA-256 hash of the key', async () => {
    const { apiKey } = await registeredAgent(sandbox.app);
    const files = await storedText(sandbox);
    expect(files).not.toContain(apiKey);
    expect(files).not.toContain(apiKey.slice(4));
    expect(files).toContain(createHash('sha256').update(apiKey).digest('hex'));
  });

  it('answers lookup for an unknown wallet with registered: false', async () => {
    const response = await sandbox.app.inject({
      url: `/api/v1/agent/auth/lookup?wallet=${newAccount().address}`,
    });
    expect(response.statusCode).toBe(200);
    expect(response.json()).toEqual({ registered: false });
  });

  it('refuses a second registration of a wallet with 409, whatever its case', async () => {
    const account = newAccount();
    expect((await register(sandbox.app, account)).statusCode).toBe(200);
    const { nonce, message } = await getNonce(sandbox.app, account.address);
    const again = await postRegister(
      sandbox.app,
      await signedBody({ wallet: account.address.toLowerCase(), nonce, message, signer: account }),
    );
    expect(again.statusCode).toBe(409);
    expect(again.json().error).toContain('already registered');
  });

  it('accepts a nonce requested in one case and a registration in another', async () => {
    const account = newAccount();
    const { nonce, message } = await getNonce(sandbox.app, account.address.toLowerCase());
    const response = await postRegister(
      sandbox.app,
      await signedBody({ wallet: getAddress(account.address), nonce, message, signer: account }),
    );
    expect(response.statusCode).toBe(200);
  });

  it('uses a nonce once', async () => {
    const account = newAccount();
    const { nonce, message } = await getNonce(sandbox.app, account.address);
    const body = await signedBody({ wallet: account.address, nonce, message, signer: account });
    expect((await postRegister(sandbox.app, body)).statusCode).toBe(200);
    expect((await sandbox.store.nonces.find(nonce))?.consumed_at).toEqual(expect.any(Number));
    const reuse = await postRegister(sandbox.app, body);
    // The wallet is registered now, which is checked first.
    expect(reuse.statusCode).toBe(409);
    expect(reuse.json().error).toContain('is already registered');
    // The same nonce for another wallet is refused for being used.
    const other = newAccount();
    const stolen = await postRegister(sandbox.app, {
      ...body,
      wallet_address: other.address,
      signature: await other.signMessage({ message }),
    });
    expect(stolen.statusCode).toBe(401);
  });

  it('lets exactly one of several concurrent registrations with one nonce succeed', async () => {
    const account = newAccount();
    const { nonce, message } = await getNonce(sandbox.app, account.address);
    const body = await signedBody({ wallet: account.address, nonce, message, signer: account });
    const responses = await Promise.all(
      Array.from({ length: 8 }, () => postRegister(sandbox.app, body)),
    );
    const statuses = responses.map((response) => response.statusCode);
    expect(statuses.filter((status) => status === 200)).toHaveLength(1);
    // A loser is refused for the used nonce or, if it started after the winner committed,
    // for the registered wallet.
    for (const response of responses.filter((r) => r.statusCode !== 200)) {
      expect([401, 409]).toContain(response.statusCode);
      expect(response.json().error).toMatch(/nonce has already been used|already registered/);
    }
  });

  it('refuses a nonce after 600 s of sandbox time, and accepts it just before', async () => {
    const early = newAccount();
    const late = newAccount();
    const earlyNonce = await getNonce(sandbox.app, early.address);
    const lateNonce = await getNonce(sandbox.app, late.address);
    const advance = await admin(sandbox.app, 'POST', '/sandbox/clock/advance', { seconds: 590 });
    expect(advance.statusCode).toBe(200);
    const ok = await postRegister(
      sandbox.app,
      await signedBody({
        wallet: early.address,
        nonce: earlyNonce.nonce,
        message: earlyNonce.message,
        signer: early,
      }),
    );
    expect(ok.statusCode).toBe(200);

    await admin(sandbox.app, 'POST', '/sandbox/clock/advance', { seconds: 11 });
    const expired = await postRegister(
      sandbox.app,
      await signedBody({
        wallet: late.address,
        nonce: lateNonce.nonce,
        message: lateNonce.message,
        signer: late,
      }),
    );
    expect(expired.statusCode).toBe(401);
    expect(expired.json().error).toContain('expired');
  });

  it('never lets a nonce issued for wallet X register wallet Y', async () => {
    const x = newAccount();
    const y = newAccount();
    const { nonce, message } = await getNonce(sandbox.app, x.address);
    const crossed = await postRegister(
      sandbox.app,
      // Y signs X's message, so only the nonce binding can stop it.
      await signedBody({ wallet: y.address, nonce, message, signer: y }),
    );
    expect(crossed.statusCode).toBe(401);
    expect(crossed.json().error).toContain('different wallet');
    const lookup = await sandbox.app.inject({
      url: `/api/v1/agent/auth/lookup?wallet=${y.address}`,
    });
    expect(lookup.json().registered).toBe(false);
  });

  it('refuses a signature by another key', async () => {
    const x = newAccount();
    const { nonce, message } = await getNonce(sandbox.app, x.address);
    const response = await postRegister(
      sandbox.app,
      await signedBody({ wallet: x.address, nonce, message, signer: newAccount() }),
    );
    expect(response.statusCode).toBe(401);
    expect(response.json().error).toContain('signature does not match');
  });

  it('refuses a signature over an altered message', async () => {
    const x = newAccount();
    const { nonce, message } = await getNonce(sandbox.app, x.address);
    const altered = message.replace('Chain ID: 84532', 'Chain ID: 1');
    expect(altered).not.toBe(message);
    const response = await postRegister(
      sandbox.app,
      await signedBody({ wallet: x.address, nonce, message: altered, signer: x }),
    );
    expect(response.statusCode).toBe(401);
  });

  it('refuses the high-s twin of a valid signature, leaving the nonce usable', async () => {
    const x = newAccount();
    const { nonce, message } = await getNonce(sandbox.app, x.address);
    const signature = await x.signMessage({ message });
    const { r, s, yParity } = parseSignature(signature);
    const twin = serializeSignature({
      r,
      s: `0x${(SECP256K1_N - BigInt(s)).toString(16).padStart(64, '0')}` as Hex,
      yParity: yParity === 0 ? 1 : 0,
    });
    // The twin is a valid ECDSA signature by the same key: only the low-s rule rejects it.
    expect(await recoverMessageAddress({ message, signature: twin })).toBe(x.address);

    const body = { ...AGENT_FIELDS, wallet_address: x.address, nonce };
    const rejected = await postRegister(sandbox.app, { ...body, signature: twin });
    expect(rejected.statusCode).toBe(401);
    const accepted = await postRegister(sandbox.app, { ...body, signature });
    expect(accepted.statusCode).toBe(200);
  });

  it('refuses an unknown nonce', async () => {
    const x = newAccount();
    const response = await postRegister(
      sandbox.app,
      await signedBody({
        wallet: x.address,
        nonce: 'ab'.repeat(32),
        message: 'anything',
        signer: x,
      }),
    );
    expect(response.statusCode).toBe(401);
    expect(response.json().error).toContain('unknown nonce');
  });
});

describe('registration field rules', () => {
  const valid = {
    ...AGENT_FIELDS,
    wallet_address: '0x000000000000000000000000000000000000bEEF',
    nonce: 'ab'.repeat(32),
    signature: `0x${'11'.repeat(65)}`,
  };

  it.each([
    ['agent_name', 'ab', 'must be 3 to 100 characters'],
    ['agent_name', 'a'.repeat(101), 'must be 3 to 100 characters'],
    ['agent_name', undefined, 'is required'],
    ['agent_name', 42, 'must be a string'],
    ['agent_type', 'wizard', 'trading'],
    ['description', 'd'.repeat(501), 'at most 500'],
    ['operator_address', undefined, 'is required'],
    ['operator_address', '0x123', '40 hex digits'],
    ['operator_address', '0x000000000000000000000000000000000000DeaD', 'checksum'],
    ['operator_email', 'not-an-email', 'e-mail'],
    ['repo_url', 'github.com/x/y', 'URL'],
    ['repo_url', 'ftp://example.com/repo', 'URL'],
    ['wallet_address', 'nope', '40 hex digits'],
    ['signature', '0x1234', '65-byte'],
    ['nonce', 'zz', 'nonce'],
  ])('rejects %s = %j with 400', async (field, value, message) => {
    const response = await postRegister(sandbox.app, { ...valid, [field]: value });
    expect(response.statusCode).toBe(400);
    expect(response.json().error).toContain(field);
    expect(response.json().error).toContain(message);
  });

  it.each([
    ['agent_name', 'abc'],
    ['agent_name', 'a'.repeat(100)],
    ['description', 'd'.repeat(500)],
    ['agent_type', 'research'],
    ['operator_email', 'ops@example.com'],
    ['operator_name', 'Ops Team'],
    ['framework', 'langchain'],
    ['repo_url', 'https://github.com/example/agent'],
    ['operator_address', '0x000000000000000000000000000000000000dead'],
  ])('accepts %s = %j at its bound', async (field, value) => {
    const response = await register(sandbox.app, newAccount(), { [field]: value });
    expect(response.statusCode).toBe(200);
  });

  it('defaults agent_type to custom', async () => {
    const { account } = await registeredAgent(sandbox.app);
    expect((await sandbox.store.agents.findByWallet(account.address))?.agent_type).toBe('custom');
  });
});

describe('agent wallets', () => {
  it('skips an HD wallet that already has history on the chain, and never hands it out', async () => {
    const next = await sandbox.store.nextWalletIndex();
    const used = sandbox.chain.wallet(next).address;
    // Someone gives the next wallet a balance over anvil's own JSON-RPC, before any agent has it.
    await rpcCall(sandbox.chain.rpcUrl, 'anvil_setBalance', [used, '0xde0b6b3a7640000']);
    const { account } = await registeredAgent(sandbox.app);
    const agent = await sandbox.store.agents.findByWallet(account.address.toLowerCase());
    expect(agent?.wallet_index).toBe(next + 1);
    expect(getAddress(agent?.agent_address as string)).toBe(sandbox.chain.wallet(next + 1).address);
    // The skipped index stays skipped: the next agent gets the one after.
    const { account: second } = await registeredAgent(sandbox.app);
    expect(
      (await sandbox.store.agents.findByWallet(second.address.toLowerCase()))?.wallet_index,
    ).toBe(next + 2);
  });
});
