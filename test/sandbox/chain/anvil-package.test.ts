import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import {
  ANVIL_VERSION,
  anvilMissingMessage,
  anvilPackage,
} from '../../../src/sandbox/chain/anvil.ts';

/**
 * The platforms `@foundry-rs/anvil` 1.7.1 ships a binary package for (its optionalDependencies,
 * `npm view @foundry-rs/anvil@1.7.1 optionalDependencies`), as Node names them.
 */
const PLATFORMS = [
  ['darwin', 'arm64'],
  ['darwin', 'x64'],
  ['linux', 'arm64'],
  ['linux', 'x64'],
  ['win32', 'x64'],
] as const;

describe('the anvil packages', () => {
  it('are all optional dependencies, at the release serve expects', () => {
    const manifest = JSON.parse(readFileSync('package.json', 'utf8')) as {
      optionalDependencies: Record<string, string>;
    };
    const expected = Object.fromEntries(
      PLATFORMS.map(([platform, arch]) => [anvilPackage(platform, arch), ANVIL_VERSION]),
    );
    expect(manifest.optionalDependencies).toEqual(expected);
  });

  it('are in the lockfile for every platform, so npm ci installs the one that fits', () => {
    const lock = JSON.parse(readFileSync('package-lock.json', 'utf8')) as {
      packages: Record<
        string,
        { version: string; optional?: boolean; os?: string[]; cpu?: string[] }
      >;
    };
    for (const [platform, arch] of PLATFORMS) {
      const entry = lock.packages[`node_modules/${anvilPackage(platform, arch)}`];
      expect(entry, anvilPackage(platform, arch)).toMatchObject({
        version: ANVIL_VERSION,
        optional: true,
        os: [platform],
        cpu: [arch],
      });
    }
  });

  it('named when anvil is missing: the exact package for the platform and the command that installs it', () => {
    expect(anvilMissingMessage('darwin', 'arm64')).toContain(
      `\`npm install @foundry-rs/anvil-darwin-arm64@${ANVIL_VERSION}\``,
    );
    expect(anvilMissingMessage('linux', 'x64')).toContain('@foundry-rs/anvil-linux-amd64');
    expect(anvilMissingMessage('linux', 'x64')).not.toContain('checkpoint');
  });
});
