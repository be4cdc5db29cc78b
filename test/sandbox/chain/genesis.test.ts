import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { buildGenesis, GENESIS_PATH, renderGenesis } from '../../../scripts/build-genesis.ts';
import { GENESIS } from '../../../src/sandbox/chain/genesis.ts';

describe('the genesis checkpoint', () => {
  it('is what deploying the current artifacts gives, block hash and all', async () => {
    // If this fails, the contracts or the deployment changed without `npm run build:contracts`.
    const rebuilt = await buildGenesis();
    expect(rebuilt.block_hash).toBe(GENESIS.block_hash);
    expect(rebuilt.block_number).toBe(GENESIS.block_number);
    expect(rebuilt.deployment).toEqual(GENESIS.deployment);
    // The committed file is exactly what the build script writes for it.
    const committed = readFileSync(GENESIS_PATH, 'utf8');
    expect(committed).toContain(`block_hash: '${rebuilt.block_hash}'`);
    expect(renderGenesis({ ...rebuilt, state: GENESIS.state })).toBe(committed);
  }, 60_000);
});
