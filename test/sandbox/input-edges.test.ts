import { getAddress } from 'viem';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decimalParts } from '../../src/api/schemas/numbers.ts';
import { chainAgent } from '../helpers/chain.ts';
import {
  ADMIN_TOKEN,
  AGENT_FIELDS,
  getNonce,
  newAccount,
  postRegister,
  register,
  sandboxWithEstablishedAgent,
  signedBody,
  type TestSandbox,
} from '../helpers/sandbox.ts';

let sandbox: TestSandbox;
let apiKey: string;
beforeAll(async () => {
  ({ sandbox, apiKey } = await sandboxWithEstablishedAgent());
});
afterAll(async () => {
  await sandbox.close();
});

/** A POST with `payload` sent as is: JSON numbers keep the digits written here. */
function postRaw(url: string, payload: string, headers: Record<string, string> = {}) {
  return sandbox.app.inject({
    method: 'POST',
    url,
    headers: { ...headers, 'content-type': 'application/json' },
    payload,
  });
}

const asAgent = () => ({ 'x-api-key': apiKey });
const asAdmin = { 'x-admin-token': ADMIN_TOKEN };
const STRATEGY = { name: 'Mean reversion', description: 'Buys dips, sells rips, sizes small.' };

describe('decimal amounts report only the rule that failed', () => {
  it.each([
    ['/api/v1/agent/vault/deposit', '{"vault_id": "moderate", "amount_usdc": -1}', 'amount_usdc'],
    ['/api/v1/agent/vault/deposit', '{"vault_id": "moderate", "amount_usdc": -0.5}', 'amount_usdc'],
    ['/sandbox/fund', `{"address": "${newAccount().address}", "usdc": -1}`, 'usdc'],
    ['/sandbox/fund', `{"address": "${newAccount().address}", "eth": -1}`, 'eth'],
  ])('%s %s', async (url, payload, field) => {
    const response = await postRaw(url, payload, { ...asAgent(), ...asAdmin });
    expect(response.statusCode).toBe(400);
    expect(response.json()).toEqual({ error: `${field}: must be greater than 0` });
  });

  it.each([
    ['1e400', 'amount_usdc: must be at most 1000000000'],
    ['1.0000000000000000001', 'amount_usdc: must have at most 6 decimal places'],
    ['1e-400', 'amount_usdc: must have at most 6 decimal places'],
    ['"12"', 'amount_usdc: must be a number'],
  ])('deposit amount_usdc %s: %s', async (amount, error) => {
    const response = await postRaw(
      '/api/v1/agent/vault/deposit',
      `{"vault_id": "moderate", "amount_usdc": ${amount}}`,
      asAgent(),
    );
    expect(response.statusCode).toBe(400);
    expect(response.json()).toEqual({ error });
  });
});

describe('POST /sandbox/fund converts amounts exactly', () => {
  it.each([
    ['0.0000001', '100000000000'],
    ['1e-7', '100000000000'],
    ['0.123456789012345678', '123456789012345678'],
    ['1.5E+2', '150000000000000000000'],
  ])('eth %s gives %s wei', async (eth, wei) => {
    const address = newAccount().address;
    const response = await postRaw(
      '/sandbox/fund',
      `{"address": "${address}", "eth": ${eth}}`,
      asAdmin,
    );
    expect(response.statusCode).toBe(200);
    expect(response.json().eth_balance_wei).toBe(wei);
  });

  it('mints usdc from its digits', async () => {
    const address = newAccount().address;
    const response = await postRaw(
      '/sandbox/fund',
      `{"address": "${address}", "usdc": 0.000001}`,
      asAdmin,
    );
    expect(response.statusCode).toBe(200);
    expect(response.json().usdc_balance_raw).toBe('1');
  });

  it.each([
    ['eth', '0.1234567890123456789', 'eth: must have at most 18 decimal places'],
    ['eth', '1e-19', 'eth: must have at most 18 decimal places'],
    ['eth', '1000.000000000000000001', 'eth: must be at most 1000'],
    ['usdc', '1.0000000000000000001', 'usdc: must have at most 6 decimal places'],
  ])('refuses %s %s: %s', async (field, amount, error) => {
    const response = await postRaw(
      '/sandbox/fund',
      `{"address": "${newAccount().address}", "${field}": ${amount}}`,
      asAdmin,
    );
    expect(response.statusCode).toBe(400);
    expect(response.json()).toEqual({ error });
  });
});

describe('integers JSON carries only inexactly', () => {
  it.each([
    ['velocity_limit', '9007199254740993', 'velocity_limit: must be 1000 to 9007199254740991'],
    ['velocity_limit', '1e400', 'velocity_limit: must be 1000 to 9007199254740991'],
    ['velocity_limit', '1152921504606846976', 'velocity_limit: must be 1000 to 9007199254740991'],
    ['correlation_threshold', '-1e400', 'correlation_threshold: must be 0 to 100'],
    ['max_leverage', '200.00000000000000001', 'max_leverage: must be an integer'],
  ])('strategy %s = %s: %s', async (field, value, error) => {
    const body = JSON.stringify(STRATEGY).replace(/}$/, `, "${field}": ${value}}`);
    const response = await postRaw('/api/v1/agent/strategy/submit', body, asAgent());
    expect(response.statusCode).toBe(400);
    expect(response.json()).toEqual({ error });
  });

  it.each([
    ['1e400', 'proposal_id: is too large'],
    ['-1e400', 'proposal_id: must not be negative'],
    ['1.00000000000000000001', 'proposal_id: must be an integer'],
  ])('vote proposal_id %s: %s', async (value, error) => {
    const response = await postRaw(
      '/api/v1/agent/governance/vote',
      `{"proposal_id": ${value}, "support": 1}`,
      asAgent(),
    );
    expect(response.statusCode).toBe(400);
    expect(response.json()).toEqual({ error });
  });

  it('says how far the clock may move for seconds = 2^53 + 1', async () => {
    const response = await postRaw(
      '/sandbox/clock/advance',
      '{"seconds": 9007199254740993}',
      asAdmin,
    );
    expect(response.statusCode).toBe(400);
    expect(response.json()).toEqual({ error: 'seconds: must be 1 to 315360000' });
  });
});

describe('the JSON body parser', () => {
  it('drops __proto__ and constructor.prototype keys instead of refusing the body', async () => {
    const address = newAccount().address;
    const response = await postRaw(
      '/sandbox/fund',
      `{"__proto__": {"polluted": 1}, "constructor": {"prototype": {"polluted": 1}}, "address": "${address}", "eth": 1}`,
      asAdmin,
    );
    expect(response.statusCode).toBe(200);
    expect(response.json().eth_balance_wei).toBe('1000000000000000000');
    expect(({} as { polluted?: unknown }).polluted).toBeUndefined();
  });

  it.each([
    ['{"agent_name": ', 'request body is not valid JSON'],
    ['{"a": 1,}', 'request body is not valid JSON (at line 1, column 9)'],
    ['', 'request body is empty'],
  ])('answers %j with 400 and a clear error', async (payload, error) => {
    const response = await postRaw('/api/v1/agent/auth/register', payload);
    expect(response.statusCode).toBe(400);
    expect(Object.keys(response.json())).toEqual(['error']);
    expect(response.json().error).toContain(error);
  });

  it('reads a body that starts with a byte-order mark', async () => {
    const address = newAccount().address;
    const response = await postRaw(
      '/sandbox/fund',
      `\uFEFF{"address": "${address}", "eth": 1}`,
      asAdmin,
    );
    expect(response.statusCode).toBe(200);
  });

  it('reads a number of 60,000 digits in linear time (no regex backtracking)', () => {
    const digits = `1${'0'.repeat(60_000)}1`;
    const started = performance.now();
    const parts = decimalParts(digits);
    // Quadratic stripping took seconds here; linear work takes well under a millisecond.
    expect(performance.now() - started).toBeLessThan(1_000);
    expect(parts).toEqual({ negative: false, digits, exponent: 0 });
    expect(decimalParts(`5${'0'.repeat(60_000)}`)).toEqual({
      negative: false,
      digits: '5',
      exponent: 60_000,
    });
  });

  it('refuses a bare number as a body', async () => {
    const response = await postRaw('/sandbox/fund', '1e400', asAdmin);
    expect(response.statusCode).toBe(400);
    expect(response.json()).toEqual({ error: 'body: must be a JSON object' });
  });
});

describe('GET /api/v1/leaderboard limit', () => {
  it('takes an empty limit as the default', async () => {
    const response = await sandbox.app.inject({ url: '/api/v1/agents?limit=' });
    expect(response.statusCode).toBe(200);
  });

  it.each(['0x10', '1e2', '%205', '5%20', '+5', '-1', '5.0'])('refuses limit=%s', async (limit) => {
    const response = await sandbox.app.inject({ url: `/api/v1/agents?limit=${limit}` });
    expect(response.statusCode).toBe(400);
    expect(response.json()).toEqual({ error: 'limit: must be plain digits (0-9 only)' });
  });

  it('refuses a repeated limit', async () => {
    const response = await sandbox.app.inject({ url: '/api/v1/agents?limit=1&limit=2' });
    expect(response.statusCode).toBe(400);
    expect(response.json().error).toMatch(/^limit: /);
  });
});

describe('names', () => {
  const REGISTER_BODY = {
    ...AGENT_FIELDS,
    wallet_address: '0x000000000000000000000000000000000000bEEF',
    nonce: 'ab'.repeat(32),
    signature: `0x${'11'.repeat(65)}`,
  };
  const BAD_NAMES: [string, string][] = [
    ['   ', 'must not be blank'],
    ['\u3000\u00a0\t ', 'must not be blank'],
    ['Trend\nBot', 'must not contain control characters'],
    ['Trend\u0007Bot', 'must not contain control characters'],
    ['Trend\u2028Bot', 'must not contain control characters'],
    ['Bot \u202Eevil', 'must not contain bidirectional control characters'],
    ['Bot \u2066x\u2069', 'must not contain bidirectional control characters'],
    ['Bot \u200F', 'must not contain bidirectional control characters'],
    ['\u200B\u200B\u200B', 'must not be blank'],
    ['\u3164\u3164\u3164', 'must not be blank'],
    ['\u2060 \u2060', 'must not be blank'],
    ['Bot\u2060Name', 'must not contain invisible format characters'],
    ['Bot\uFFF9Name', 'must not contain invisible format characters'],
    ['Bot \u061C', 'must not contain bidirectional control characters'],
    ['Bot \uD800', 'must be well-formed Unicode'],
    ['Bot \uDC00x', 'must be well-formed Unicode'],
  ];

  it.each(BAD_NAMES)('refuses agent_name %j', async (name, error) => {
    const response = await postRegister(sandbox.app, { ...REGISTER_BODY, agent_name: name });
    expect(response.statusCode).toBe(400);
    expect(response.json()).toEqual({ error: expect.stringMatching(`^agent_name: ${error}`) });
  });

  it.each(BAD_NAMES)('refuses a strategy name %j', async (name, error) => {
    const response = await sandbox.app.inject({
      method: 'POST',
      url: '/api/v1/agent/strategy/submit',
      headers: asAgent(),
      payload: { ...STRATEGY, name },
    });
    expect(response.statusCode).toBe(400);
    expect(response.json()).toEqual({ error: expect.stringMatching(`^name: ${error}`) });
  });

  it.each([
    ['operator_name', ' '],
    ['framework', 'eliza\u202E'],
  ])('refuses %s = %j', async (field, value) => {
    const response = await postRegister(sandbox.app, { ...REGISTER_BODY, [field]: value });
    expect(response.statusCode).toBe(400);
    expect(response.json().error).toMatch(new RegExp(`^${field}: `));
  });

  it('refuses a lone surrogate in a strategy description, which the chain cannot store', async () => {
    const response = await sandbox.app.inject({
      method: 'POST',
      url: '/api/v1/agent/strategy/submit',
      headers: asAgent(),
      payload: { ...STRATEGY, description: 'Buys dips \uD83D only' },
    });
    expect(response.statusCode).toBe(400);
    expect(response.json().error).toContain('description: must be well-formed Unicode');
  });

  it('accepts names in any script, with emoji', async () => {
    const response = await register(sandbox.app, newAccount(), { agent_name: 'Zoë 交易 🚀 بوت' });
    expect(response.statusCode).toBe(200);
    expect(response.json().agent_name).toBe('Zoë 交易 🚀 بوت');
  });
});

describe('derived strategy DNA', () => {
  it('differs for two submissions of one name in the same second', async () => {
    const agent = await chainAgent(sandbox);
    const submit = () =>
      sandbox.app.inject({
        method: 'POST',
        url: '/api/v1/agent/strategy/submit',
        headers: { 'x-api-key': agent.apiKey },
        payload: STRATEGY,
      });
    const [first, second] = await Promise.all([submit(), submit()]);
    expect(first?.statusCode).toBe(200);
    expect(second?.statusCode).toBe(200);
    expect(first?.json().dna_string).not.toBe(second?.json().dna_string);
  });
});

describe('POST /api/v1/agent/auth/register for a registered wallet', () => {
  it('names the wallet with its EIP-55 checksum, whatever case was sent', async () => {
    const account = newAccount();
    expect((await register(sandbox.app, account)).statusCode).toBe(200);
    const { nonce, message } = await getNonce(sandbox.app, account.address);
    const lower = account.address.toLowerCase();
    const again = await postRegister(
      sandbox.app,
      await signedBody({ wallet: lower, nonce, message, signer: account }),
    );
    expect(again.statusCode).toBe(409);
    expect(again.json()).toEqual({
      error: `wallet ${getAddress(account.address)} is already registered`,
    });
  });
});
