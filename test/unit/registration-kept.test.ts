import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApiClient } from '../../src/api/client.ts';
import { ApiError } from '../../src/api/errors.ts';
import { type KeptRegistrations, signAndRegister } from '../../src/cli/registration.ts';
import { openPendingRegistrations } from '../../src/config/pending-registrations.ts';
import { type Canned, type CannedServer, cannedServer } from '../helpers/run-context.ts';

/**
 * A registration's signed request is kept until an answer says what happened: dropped on a
 * 2xx or an answer of the service's own, kept through a rate limit; a kept one sent again and
 * refused with 401 (its nonce expired before it ever ran) says that a new run signs anew.
 */

const account = privateKeyToAccount(generatePrivateKey());
const NONCE = 'ab'.repeat(32);
let server: CannedServer;
/** The next register answers, in order; each register also records whether it was kept then. */
const answers: Canned[] = [];
const keptWhenSent: boolean[] = [];
let dir: string;
let kept: KeptRegistrations;
const said: string[] = [];

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'agentctl-kept-'));
  kept = {
    store: openPendingRegistrations(dir),
    onResend: (text) => said.push(text),
    onKeepFailed: (text) => said.push(text),
  };
  server = await cannedServer((request) => {
    if (request.url.pathname === '/api/v1/agent/auth/nonce') {
      return { body: { nonce: NONCE, message: `sign ${NONCE}`, expires_in_seconds: 300 } };
    }
    keptWhenSent.push(readdirSync(kept.store.dir).length === 1);
    return answers.shift() ?? { status: 500, body: { error: 'no answer set' } };
  });
});
afterAll(async () => {
  await server.close();
  rmSync(dir, { recursive: true, force: true });
});

const client = (key: string) =>
  createApiClient({
    baseUrl: server.url,
    userAgent: 'test',
    idempotencyKey: () => ({ key, rerunKey: key }),
  });

const registered = {
  success: true,
  agent_id: 'a-1',
  agent_name: 'Kept',
  api_key: 'agk_secret',
  api_key_prefix: 'agk_secre',
  tier: 'unverified',
  message: 'ok',
};

describe('a registration kept under its key', () => {
  it('is kept before its first try and dropped once answered', async () => {
    answers.push({ body: registered, headers: { 'idempotent-replayed': 'false' } });
    const response = await signAndRegister(client('k-ok'), account, { agent_name: 'Kept' }, kept);
    expect(response.data).toMatchObject({ api_key: 'agk_secret' });
    expect(keptWhenSent).toEqual([true]);
    expect(readdirSync(kept.store.dir)).toEqual([]);
  });

  it('stays through a rate limit (it did not run), is sent again as it was, and a 401 drops it', async () => {
    keptWhenSent.length = 0;
    server.requests.length = 0;
    answers.push({ status: 429, body: { error: 'slow down' }, headers: { 'retry-after': '60' } });
    await expect(
      signAndRegister(client('k-limited'), account, { agent_name: 'Kept' }, kept),
    ).rejects.toMatchObject({ status: 429 });
    expect(readdirSync(kept.store.dir)).toHaveLength(1);

    answers.push({ status: 401, body: { error: 'nonce has expired; request a new one' } });
    const refused = await signAndRegister(
      client('k-limited'),
      account,
      { agent_name: 'Ignored' },
      kept,
    ).catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(ApiError);
    expect((refused as ApiError).message).toBe(
      'nonce has expired; request a new one; the registration kept from an earlier run was not done, and is dropped: the same command run again signs a new one',
    );
    expect(said).toEqual([
      expect.stringMatching(
        new RegExp(
          `^sending the registration of ${account.address} kept for this Idempotency-Key since .* UTC again, not signing a new one$`,
        ),
      ),
    ]);
    // One nonce: the second try sent the first's body, byte for byte.
    const sent = server.requests.filter(({ method }) => method === 'POST');
    expect(server.requests.map(({ method }) => method)).toEqual(['GET', 'POST', 'POST']);
    expect(sent[1]?.body).toBe(sent[0]?.body);
    expect(JSON.parse(sent[0]?.body ?? '{}')).toMatchObject({ agent_name: 'Kept', nonce: NONCE });
    expect(keptWhenSent).toEqual([true, true]);
    expect(readdirSync(kept.store.dir)).toEqual([]);
  });
});
