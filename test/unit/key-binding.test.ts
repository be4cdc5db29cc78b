import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type GlobalOptions, sameService } from '../../src/cli/context.ts';
import { openConfig, type Profile } from '../../src/config/profiles.ts';
import { type CannedServer, cannedServer, capturedContext } from '../helpers/run-context.ts';

/** A service that answers {}; `keys` is the X-API-Key of each request. */
interface Recorder {
  url: string;
  server: CannedServer;
  readonly keys: Array<string | undefined>;
}

async function recorder(): Promise<Recorder> {
  const server = await cannedServer(() => ({ body: {} }));
  return {
    url: server.url,
    server,
    get keys() {
      return server.requests.map((request) => request.headers['x-api-key'] as string | undefined);
    },
  };
}

let dir: string;
let base: Recorder;
let data: Recorder;
let elsewhere: Recorder;
beforeAll(async () => {
  [base, data, elsewhere] = await Promise.all([recorder(), recorder(), recorder()]);
});
afterEach(() => {
  for (const at of [base, data, elsewhere]) at.server.requests.length = 0;
});
afterAll(async () => {
  await Promise.all([base, data, elsewhere].map((at) => at.server.close()));
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** A context over a fresh config holding `profile` as "default". */
async function contextWith(
  profile: Profile,
  globals: GlobalOptions = {},
  env: NodeJS.ProcessEnv = {},
) {
  dir = mkdtempSync(join(tmpdir(), 'agentctl-binding-unit-'));
  await openConfig({ AGENTCTL_CONFIG_DIR: dir }).set('default', profile);
  const { context, text } = capturedContext(globals, { AGENTCTL_CONFIG_DIR: dir, ...env });
  return { context, stdout: { text: () => text.stdout }, stderr: { text: () => text.stderr } };
}

describe("the profile's API key is bound to its service", () => {
  it("goes to the profile's base URL and to its data URL (the same service's data API)", async () => {
    const { context, stderr } = await contextWith({
      base_url: `${base.url}/`,
      data_url: data.url,
      api_key: 'agk_bound',
    });
    await (await context.client()).raw('GET', '/api/v1/agent/wallet');
    await (await context.dataClient()).raw('GET', '/v1/vaults');
    await context.close();
    expect(base.keys).toEqual(['agk_bound']);
    expect(data.keys).toEqual(['agk_bound']);
    expect(stderr.text()).toBe('');
  });

  it('is withheld from any other URL, said once per URL, on stderr only', async () => {
    const { context, stdout, stderr } = await contextWith(
      { base_url: base.url, api_key: 'agk_bound' },
      { dataUrl: elsewhere.url, json: true },
    );
    const client = await context.dataClient();
    await client.raw('GET', '/v1/vaults');
    await client.raw('GET', '/v1/vaults');
    await context.close();
    expect(elsewhere.keys).toEqual([undefined, undefined]);
    expect(stdout.text()).toBe('');
    expect(stderr.text()).toBe(
      `agentctl: not sending the API key of profile "default" to ${elsewhere.url}: it was issued for ${base.url}; pass --api-key or set AGENTCTL_API_KEY to send a key there\n`,
    );
  });

  it('belongs to the default sandbox when the profile names no base URL', async () => {
    const { context, stderr } = await contextWith({ api_key: 'agk_bound' }, { baseUrl: base.url });
    await (await context.client()).raw('GET', '/health');
    await context.close();
    expect(base.keys).toEqual([undefined]);
    expect(stderr.text()).toContain('it was issued for http://127.0.0.1:8787');
  });

  it('a key given by flag or environment goes wherever the command goes', async () => {
    const byFlag = await contextWith(
      { base_url: base.url, api_key: 'agk_bound' },
      { baseUrl: elsewhere.url, apiKey: 'agk_flag' },
    );
    await (await byFlag.context.client()).raw('GET', '/health');
    await byFlag.context.close();
    const byEnv = await contextWith(
      { base_url: base.url, api_key: 'agk_bound' },
      { baseUrl: elsewhere.url },
      { AGENTCTL_API_KEY: 'agk_env' },
    );
    await (await byEnv.context.client()).raw('GET', '/health');
    await byEnv.context.close();
    expect(elsewhere.keys).toEqual(['agk_flag', 'agk_env']);
    expect(byFlag.stderr.text() + byEnv.stderr.text()).toBe('');
  });

  it('a command that needs a key is refused, naming where the key belongs', async () => {
    const { context } = await contextWith(
      { base_url: base.url, api_key: 'agk_bound' },
      { baseUrl: elsewhere.url },
    );
    await expect(context.authenticatedClient()).rejects.toThrow(
      `no API key for ${elsewhere.url}: the one in profile "default" was issued for ${base.url}`,
    );
    await context.close();
    expect(elsewhere.keys).toEqual([]);
  });
});

describe('sameService', () => {
  it('compares scheme, host, port and path, trailing slashes and default ports aside', () => {
    expect(sameService('http://127.0.0.1:8787', 'http://127.0.0.1:8787/')).toBe(true);
    expect(sameService('http://Example.org:80/api', 'http://example.org/api/')).toBe(true);
    expect(sameService('http://127.0.0.1:8787', 'http://127.0.0.1:8788')).toBe(false);
    expect(sameService('http://example.org', 'https://example.org')).toBe(false);
    expect(sameService('http://example.org/a', 'http://example.org/b')).toBe(false);
  });
});
