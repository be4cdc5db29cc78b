import { readFileSync } from 'node:fs';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { describe, expect, it } from 'vitest';
import { call, chainAgent, useChainSandbox } from '../helpers/chain.ts';
import { ADMIN_TOKEN, type TestSandbox } from '../helpers/sandbox.ts';

let sandbox: TestSandbox;
useChainSandbox((started) => {
  sandbox = started;
});

const COMMITTED = new URL('../../openapi.json', import.meta.url);

// biome-ignore lint/suspicious/noExplicitAny: an OpenAPI document, walked by path
type Document = any;

/** The operation of `document` that serves `method path` (path templates matched). */
function operationFor(document: Document, method: string, url: string) {
  const path = url.split('?')[0] as string;
  for (const [template, operations] of Object.entries(document.paths)) {
    const pattern = new RegExp(`^${template.replace(/\{[^}]+\}/g, '[^/]+')}$`);
    if (pattern.test(path)) {
      return { template, operation: (operations as Document)[method.toLowerCase()] };
    }
  }
  return undefined;
}

describe('GET /openapi.json', () => {
  it('serves an OpenAPI 3.1 document equal to the committed openapi.json (run `npm run build:openapi` after changing a route)', async () => {
    const served = await sandbox.app.inject({ url: '/openapi.json' });
    expect(served.statusCode).toBe(200);
    const document = served.json();
    expect(document.openapi).toBe('3.1.0');
    expect(document).toEqual(JSON.parse(readFileSync(COMMITTED, 'utf8')));
    // Every route of the three parts, each with its success and its error shapes.
    const paths = Object.keys(document.paths);
    expect(paths.filter((p) => p.startsWith('/api/v1/')).length + 1).toBe(18);
    expect(paths.filter((p) => p.startsWith('/v1/'))).toHaveLength(9);
    expect(paths).toContain('/sandbox/vaults/fulfillment-delay');
    for (const operations of Object.values(document.paths) as Document[]) {
      for (const operation of Object.values(operations) as Document[]) {
        expect(operation.responses['200']).toBeDefined();
        expect(Object.keys(operation.responses).some((status) => status >= '400')).toBe(true);
      }
    }
  });

  it('lists Idempotency-Key and Idempotent-Replayed on every write, and on no read', async () => {
    const document = (await sandbox.app.inject({ url: '/openapi.json' })).json();
    const writes: string[] = [];
    for (const [path, operations] of Object.entries(document.paths) as Array<[string, Document]>) {
      for (const [method, operation] of Object.entries(operations) as Array<[string, Document]>) {
        const header = (operation.parameters ?? []).find(
          (parameter: Document) =>
            parameter.in === 'header' && parameter.name === 'idempotency-key',
        );
        const read =
          method === 'get' || ['/api/v1/positions', '/api/v1/nfts', '/graphql'].includes(path);
        if (read) {
          expect(header, `${method} ${path}`).toBeUndefined();
          continue;
        }
        writes.push(`${method} ${path}`);
        expect(header, `${method} ${path}`).toMatchObject({
          required: false,
          schema: { maxLength: 255, minLength: 1 },
        });
        expect(operation.responses['200'].headers['Idempotent-Replayed']).toBeDefined();
        expect(operation.responses['422']).toBeDefined();
        expect(operation.responses['409'].headers['Retry-After']).toBeDefined();
      }
    }
    expect(writes).toEqual(
      expect.arrayContaining([
        'post /api/v1/agent/auth/register',
        'post /api/v1/agent/vault/deposit',
        'post /api/v1/agent/strategy/submit',
        'post /api/v1/agent/governance/vote',
        'post /api/v1/agent/faucet',
        'post /sandbox/fund',
        'post /sandbox/clock/advance',
        'post /sandbox/proposals',
        'post /sandbox/strategies/status',
        'post /sandbox/vaults/fulfillment-delay',
        'post /sandbox/nodes',
        'post /sandbox/snapshots',
        'post /sandbox/snapshots/{name}/restore',
        'delete /sandbox/snapshots/{name}',
      ]),
    );
  });

  it('describes the real answers: each validates against its operation’s schema', async () => {
    const document = (await sandbox.app.inject({ url: '/openapi.json' })).json();
    const ajv = new Ajv2020({ strict: false, allErrors: true });
    ajv.addSchema({ ...document, $id: 'openapi' });
    const agent = await chainAgent(sandbox, 'established');
    const vault = sandbox.chain.deployment.vaults.moderate;
    const admin = { 'x-admin-token': ADMIN_TOKEN };
    const requests: Array<{
      method: 'GET' | 'POST';
      url: string;
      payload?: object;
      key?: boolean;
      headers?: Record<string, string>;
      status: number;
    }> = [
      { method: 'GET', url: '/health', status: 200 },
      { method: 'GET', url: '/api/v1/vaults', status: 200 },
      { method: 'GET', url: '/api/v1/agents?limit=5', status: 200 },
      { method: 'GET', url: '/api/v1/agents/stats', status: 200 },
      { method: 'GET', url: '/api/v1/agent/wallet', key: true, status: 200 },
      {
        method: 'POST',
        url: '/api/v1/agent/vault/deposit',
        payload: { vault_id: 'moderate', amount_usdc: 5 },
        key: true,
        status: 200,
      },
      {
        method: 'POST',
        url: '/api/v1/agent/vault/deposit',
        payload: { vault_id: 'configurable', amount_usdc: 5 },
        key: true,
        status: 200,
      },
      {
        method: 'POST',
        url: '/api/v1/agent/vault/deposit',
        payload: { vault_id: 'nowhere', amount_usdc: 5 },
        key: true,
        status: 400,
      },
      { method: 'GET', url: '/api/v1/agent/vault/positions', status: 401 },
      { method: 'GET', url: '/sandbox/info', headers: admin, status: 200 },
      {
        method: 'POST',
        url: '/sandbox/nodes',
        payload: { name: 'Doc node', operator_address: `0x${'aa'.repeat(20)}` },
        headers: admin,
        status: 200,
      },
      { method: 'GET', url: '/v1/vaults', status: 200 },
      { method: 'GET', url: `/v1/vaults/${vault}`, status: 200 },
      { method: 'GET', url: `/v1/vaults/${vault}/history?period=7d&interval=4h`, status: 200 },
      { method: 'GET', url: `/v1/vaults/0x${'12'.repeat(20)}`, status: 404 },
      { method: 'GET', url: '/v1/vaults/0x12', status: 400 },
      { method: 'GET', url: '/v1/strategies', status: 200 },
      { method: 'GET', url: `/v1/strategies/0x${'00'.repeat(32)}/performance`, status: 404 },
      { method: 'GET', url: '/v1/nodes', status: 200 },
      { method: 'GET', url: '/v1/protocol/stats', status: 200 },
      { method: 'GET', url: `/v1/users/${agent.agentAddress}/transactions`, status: 200 },
      { method: 'GET', url: `/v1/users/${agent.agentAddress}/positions`, status: 200 },
      { method: 'GET', url: `/v1/users/${agent.agentAddress}/transactions?limit=0`, status: 400 },
    ];
    for (const request of requests) {
      const response = await (request.key
        ? call(sandbox, agent.apiKey, request.method, request.url, request.payload)
        : sandbox.app.inject({
            method: request.method,
            url: request.url,
            ...(request.payload && { payload: request.payload }),
            ...(request.headers && { headers: request.headers }),
          }));
      expect(response.statusCode, `${request.method} ${request.url}`).toBe(request.status);
      const found = operationFor(document, request.method, request.url);
      expect(found?.operation, `${request.method} ${request.url} is in the document`).toBeDefined();
      const pointer = ['paths', found?.template, request.method.toLowerCase(), 'responses']
        .map((part) => String(part).replaceAll('~', '~0').replaceAll('/', '~1'))
        .join('/');
      const validate = ajv.compile({
        $ref: `openapi#/${pointer}/${response.statusCode}/content/application~1json/schema`,
      });
      const valid = validate(response.json());
      expect(valid, `${request.method} ${request.url}: ${ajv.errorsText(validate.errors)}`).toBe(
        true,
      );
    }
  });
});
