import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { ARTIFACTS_PATH, renderArtifacts } from '../../../scripts/build-contracts.ts';

describe('contract artifacts', () => {
  it('match a fresh solc compile of the Solidity sources', () => {
    // If this fails, a .sol file changed without `npm run build:contracts`.
    expect(readFileSync(ARTIFACTS_PATH, 'utf8')).toBe(renderArtifacts());
  }, 60_000);
});
