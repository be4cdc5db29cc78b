import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { contextFrom, type GlobalOptions, sameService } from '../../src/cli/context.ts';
import { openConfig, type Profile } from '../../src/config/profiles.ts';

/** A service that answers {} and remembers the X-API-Key of each request. */
interface Recorder {
  url: string;
  keys: Array<string | undefined>;
}

const servers: Server[] = [];
async function recorder(): Promise<Recorder> {
  const keys: Array<string | undefined> = [];
  const server = createServer((request, response) => {
    keys.push(request.headers['x-api-key'] as string | undefined);
    response.setHeader('content-type', 'application/json');
    response.end('{}');
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, keys };
}

let dir: string;
let base: Recorder;
let data: Recorder;
let elsewhere: Recorder;
beforeAll(async () => {
  [base, data, elsewhere] = await Promise.all([recorder(), recorder(), recorder()]);
});
afterEach(() => {
  for (const at of [base, data, elsewhere]) at.keys.length = 0;
});
afterAll(() => {
  for (const server of servers) server.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

function collector() {
  let text = '';
  const stream = new Writable({
    write(chunk, _encoding, done) {
      text += chunk;
      done();
    },
  });
  return { stream, text: () => text };
}

/** A context over a fresh config holding `profile` as "default". */
function contextWith(profile: Profile, globals: GlobalOptions = {}, env: NodeJS.ProcessEnv = {}) {
  dir = mkdtempSync(join(tmpdir(), 'agentctl-binding-unit-'));
  openConfig({ AGENTCTL_CONFIG_DIR: dir }).set('default', profile);
  const stdout = collector();
  const stderr = collector();
  const context = contextFrom(
    globals,
    { AGENTCTL_CONFIG_DIR: dir, ...env },
    {
      stdout: stdout.stream,
      stderr: stderr.stream,
    },
  );
  return { context, stdout, stderr };
}

describe("the profile's API key is bound to its service", () => {
  it("goes to the profile's base URL and to its data URL (the same service's data API)", async () => {
    const { context, stderr } = contextWith({
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
    const { context, stdout, stderr } = contextWith(
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
    const { context, stderr } = contextWith({ api_key: 'agk_bound' }, { baseUrl: base.url });
    await (await context.client()).raw('GET', '/health');
    await context.close();
    expect(base.keys).toEqual([undefined]);
    expect(stderr.text()).toContain('it was issued for http://127.0.0.1:8787');
  });

  it('a key given by flag or environment goes wherever the command goes', async () => {
    const byFlag = contextWith(
      { base_url: base.url, api_key: 'agk_bound' },
      { baseUrl: elsewhere.url, apiKey: 'agk_flag' },
    );
    await (await byFlag.context.client()).raw('GET', '/health');
    await byFlag.context.close();
    const byEnv = contextWith(
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
    const { context } = contextWith(
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
