import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { registerOver, type ServeProcess, startServe } from '../helpers/serve.ts';

/**
 * The index's reconciliation with the chain at each checkpoint (indexer.ts observe and
 * reconcile) on a real serve under writes: anvil answers a read at its head's hash from the
 * block it is mining meanwhile, so a comparison made outside the checkpoint's exclusive
 * section saw later states and "corrected" an index that was right.
 */
const ADMIN_TOKEN = 'reconcile-admin-token-0123456789abcdef';
const AGENTS = 6;
const CHECKPOINTS = 25;

let dir = '';
let serve: ServeProcess | undefined;
afterEach(async () => {
  serve?.child.kill('SIGTERM');
  await serve?.exited;
  serve = undefined;
  rmSync(dir, { recursive: true, force: true });
});

describe('reconciliation at checkpoints', () => {
  it('finds nothing to correct while agents deposit across checkpoints', async () => {
    dir = mkdtempSync(join(tmpdir(), 'agentctl-reconcile-'));
    serve = await startServe([
      '--state',
      dir,
      '--admin-token',
      ADMIN_TOKEN,
      '--log-level',
      'warn',
      '--rate-limit',
      'off',
    ]);
    const url = serve.url;
    const keys = await Promise.all(
      Array.from({ length: AGENTS }, async () => (await registerOver(url)).apiKey),
    );
    let checkpoints = 0;
    let writing = true;
    const depositor = async (apiKey: string) => {
      while (writing) {
        const response = await fetch(`${url}/api/v1/agent/vault/deposit`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-api-key': apiKey },
          body: JSON.stringify({ vault_id: 'moderate', amount_usdc: 1 }),
        });
        expect(response.status, await response.text()).toBe(200);
      }
    };
    const deposits = keys.map(depositor);
    // Checkpoints one after another, each followed by a reconciliation, while blocks are made.
    while (checkpoints < CHECKPOINTS) {
      const response = await fetch(`${url}/sandbox/checkpoint`, {
        method: 'POST',
        headers: { 'x-admin-token': ADMIN_TOKEN },
      });
      expect(response.status, await response.text()).toBe(200);
      checkpoints++;
    }
    writing = false;
    await Promise.all(deposits);
    expect(serve.stderr()).not.toMatch(/the index had tvl/);
    expect(serve.stdout()).not.toMatch(/the index had tvl/);
  }, 120_000);
});
