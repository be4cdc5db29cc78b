import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { encodeAbiParameters, type Hex, keccak256, toHex } from 'viem';
import { afterEach, describe, expect, it } from 'vitest';
import {
  registerOver,
  requestOver,
  rpcCall,
  type ServeProcess,
  startServe,
} from '../helpers/serve.ts';

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

const start = (state: string) =>
  startServe([
    '--state',
    state,
    '--admin-token',
    ADMIN_TOKEN,
    '--log-level',
    'warn',
    '--rate-limit',
    'off',
  ]);

describe('reconciliation at checkpoints', () => {
  it('finds nothing to correct while agents deposit across checkpoints', async () => {
    dir = mkdtempSync(join(tmpdir(), 'agentctl-reconcile-'));
    serve = await start(dir);
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

describe('a graceful shutdown', () => {
  it('reconciles the index at its final checkpoint, so a restart answers the chain’s tvl', async () => {
    dir = mkdtempSync(join(tmpdir(), 'agentctl-reconcile-'));
    serve = await start(dir);
    const info = (await requestOver(serve.url, ADMIN_TOKEN, 'GET', '/sandbox/info')).body;
    const rpcUrl = info.rpc_url as string;
    const usdc = info.contracts.usdc as Hex;
    const vault = info.contracts.vaults.moderate as Hex;
    // MockUSDC (OpenZeppelin's ERC20) keeps its balances in the mapping at slot 0.
    const slot = keccak256(
      encodeAbiParameters([{ type: 'address' }, { type: 'uint256' }], [vault, 0n]),
    );
    const balance = BigInt(
      (await rpcCall(rpcUrl, 'eth_getStorageAt', [usdc, slot, 'latest'])) as Hex,
    );
    const added = 1_000_000n * 10n ** 6n;
    await rpcCall(rpcUrl, 'anvil_setStorageAt', [usdc, slot, toHex(balance + added, { size: 32 })]);
    // A block after the change, so that the final checkpoint has something new to hold.
    await rpcCall(rpcUrl, 'evm_mine');
    const first = serve;
    first.child.kill('SIGTERM');
    await first.exited;
    expect(first.stderr() + first.stdout()).toMatch(/the index had tvl \d+, the chain \d+ /);

    serve = await start(dir);
    const summary = (await (await fetch(`${serve.url}/v1/vaults/${vault}`)).json()) as {
      tvl: string;
    };
    // The balance set, plus whatever yield it has earned since (none within the same second).
    expect(BigInt(summary.tvl)).toBeGreaterThanOrEqual(balance + added);
  }, 120_000);
});
