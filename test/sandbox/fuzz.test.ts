import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ADMIN_TOKEN,
  AGENT_FIELDS,
  getNonce,
  newAccount,
  postRegister,
  sandboxWithEstablishedAgent,
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

const REGISTER_FIELDS = [
  'wallet_address',
  'signature',
  'nonce',
  'agent_name',
  'agent_type',
  'description',
  'operator_address',
  'operator_email',
  'operator_name',
  'framework',
  'repo_url',
];

/** Values that stress parsers: wrong types, near-valid hex, huge and odd strings. */
const nastyValue = fc.oneof(
  fc.jsonValue(),
  fc.string({ unit: 'binary', maxLength: 300 }),
  fc.constantFrom(
    '0x',
    `0x${'f'.repeat(40)}`,
    `0x${'F'.repeat(130)}`,
    '__proto__',
    'constructor',
    '\u0000',
    'a'.repeat(5000),
  ),
  fc
    .string({ unit: fc.constantFrom(...'0123456789abcdefABCDEF'), maxLength: 140 })
    .map((hex) => `0x${hex}`),
);

const registerLikeBody = fc.dictionary(
  fc.oneof(fc.constantFrom(...REGISTER_FIELDS), fc.string()),
  nastyValue,
);

/**
 * Where these bodies go: every POST route, with the credentials it needs, so that the body
 * itself is what gets checked (not refused earlier for a missing key).
 */
const PUBLIC_POSTS = ['/api/v1/agent/auth/register', '/api/v1/positions', '/api/v1/nfts'];
const AGENT_POSTS = [
  '/api/v1/agent/vault/deposit',
  '/api/v1/agent/strategy/submit',
  '/api/v1/agent/governance/vote',
  '/api/v1/agent/faucet',
];
const ADMIN_POSTS = [
  '/sandbox/clock/advance',
  '/sandbox/agents/tier',
  '/sandbox/fund',
  '/sandbox/proposals',
  '/sandbox/strategies/status',
  '/sandbox/checkpoint',
  '/sandbox/vaults/fulfillment-delay',
  '/sandbox/nodes',
  '/sandbox/snapshots',
  // Taken literally: `:name` is no snapshot name (400), so no fuzzed body restores anything.
  '/sandbox/snapshots/:name/restore',
];
const postRoutes = () => [
  ...PUBLIC_POSTS.map((url) => ({ url, headers: {} })),
  ...AGENT_POSTS.map((url) => ({ url, headers: { 'x-api-key': apiKey } })),
  ...ADMIN_POSTS.map((url) => ({ url, headers: { 'x-admin-token': ADMIN_TOKEN } })),
];

it('covers every POST route the app has', () => {
  // printRoutes draws a tree: a route under a parametric one (`/:name`, then `/restore`) is a
  // line of its own, indented under it. Whole paths are put back together from the indents.
  const parents: Array<{ indent: number; path: string }> = [];
  const routes: string[] = [];
  for (const line of sandbox.app.printRoutes({ commonPrefix: false }).split('\n')) {
    const indent = line.search(/\//);
    if (indent < 0) continue;
    const segment = line.slice(indent).replace(/ \(.*$/, '');
    while (parents.length > 0 && (parents.at(-1)?.indent ?? 0) >= indent) parents.pop();
    const path = `${parents.at(-1)?.path ?? ''}${segment}`;
    parents.push({ indent, path });
    if (/\(.*\bPOST\b.*\)/.test(line)) routes.push(path);
  }
  expect(routes.sort()).toEqual([...postRoutes().map((route) => route.url), '/graphql'].sort());
});

/** /graphql answers a GraphQL response, errors included, and never a 5xx. */
function expectGraphqlAnswer(response: { statusCode: number; body: string }) {
  expect(response.statusCode).toBeLessThan(500);
  const body = JSON.parse(response.body);
  if (response.statusCode !== 200 || body.errors) {
    expect(body.errors.length).toBeGreaterThan(0);
    for (const error of body.errors) {
      expect(typeof error.message).toBe('string');
      expect(typeof error.extensions.code).toBe('string');
      expect(error.extensions.code).not.toBe('INTERNAL_SERVER_ERROR');
    }
  }
}

describe('fuzzed GraphQL requests never produce a 5xx', () => {
  const fragments = fc.constantFrom(
    '{',
    '}',
    'vaults',
    'vault(address: "0x12")',
    'userTransactions(address: $a, limit: $l)',
    'strategy(id: 1)',
    '...F',
    'fragment F on Query',
    'query ($a: String!, $l: Int)',
    'subscription',
    'a: ',
    'tvl',
    'apy { current }',
    '__schema { types { name } }',
    '"',
    '(',
  );
  it('documents, variables and bodies', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(
          fc.record({
            query: fc.array(fragments, { maxLength: 12 }).map((parts) => parts.join(' ')),
            variables: fc.oneof(
              fc.constant(undefined),
              fc.dictionary(fc.constantFrom('a', 'l', 'x'), fc.jsonValue()),
            ),
          }),
          fc.jsonValue(),
        ),
        async (body) => {
          const response = await sandbox.app.inject({
            method: 'POST',
            url: '/graphql',
            headers: { 'content-type': 'application/json' },
            payload: JSON.stringify(body),
          });
          expectGraphqlAnswer(response);
        },
      ),
      { numRuns: 300 },
    );
  });
});

function expectClientError(response: { statusCode: number; body: string }) {
  expect(response.statusCode).toBeLessThan(500);
  if (response.statusCode >= 400) {
    expect(typeof JSON.parse(response.body).error).toBe('string');
  }
}

describe('fuzzed requests never produce a 5xx', () => {
  it('JSON bodies', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...postRoutes()),
        fc.oneof(registerLikeBody, fc.jsonValue()),
        async (route, body) => {
          const response = await sandbox.app.inject({
            method: 'POST',
            url: route.url,
            headers: { ...route.headers, 'content-type': 'application/json' },
            payload: JSON.stringify(body),
          });
          expectClientError(response);
        },
      ),
      { numRuns: 300 },
    );
  });

  it('well-formed registrations with arbitrary 65-byte signatures are refused with 401', async () => {
    const account = newAccount();
    const { nonce } = await getNonce(sandbox.app, account.address);
    await fc.assert(
      fc.asyncProperty(fc.uint8Array({ minLength: 65, maxLength: 65 }), async (bytes) => {
        const response = await postRegister(sandbox.app, {
          ...AGENT_FIELDS,
          wallet_address: account.address,
          nonce,
          signature: `0x${Buffer.from(bytes).toString('hex')}`,
        });
        expect(response.statusCode).toBe(401);
      }),
      { numRuns: 200 },
    );
  });

  it('raw bytes under arbitrary content types', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...postRoutes()),
        fc.constantFrom(
          'application/json',
          'application/json; charset=utf-16',
          'text/plain',
          'multipart/form-data',
          '',
          'application/octet-stream',
        ),
        fc.uint8Array({ maxLength: 500 }),
        async (route, contentType, bytes) => {
          const response = await sandbox.app.inject({
            method: 'POST',
            url: route.url,
            headers: { ...route.headers, ...(contentType ? { 'content-type': contentType } : {}) },
            payload: Buffer.from(bytes),
          });
          expectClientError(response);
        },
      ),
      { numRuns: 200 },
    );
  });

  it('query strings', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(
          '/api/v1/agent/auth/nonce',
          '/api/v1/agent/auth/lookup',
          '/api/v1/agents',
          '/api/v1/agents/stats',
          '/health',
        ),
        fc.dictionary(
          fc.constantFrom('wallet', 'limit', 'x'),
          fc.oneof(fc.string(), fc.array(fc.string())),
        ),
        async (url, query) => {
          const response = await sandbox.app.inject({ method: 'GET', url, query });
          expectClientError(response);
        },
      ),
      { numRuns: 300 },
    );
  });
});
