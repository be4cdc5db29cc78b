import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import {
  ANVIL_VERSION,
  anvilMissingMessage,
  anvilPackage,
} from '../../../src/sandbox/chain/anvil.ts';

/**
 * The platform packages `@foundry-rs/anvil` itself depends on at the release serve expects: the
 * optionalDependencies of its package.json, read from the registry (`npm view`).
 *
 * Not by depending on `@foundry-rs/anvil`: its postinstall (postinstall.mjs) downloads the
 * binary when the platform package is missing, and nothing here may download a binary at
 * install time. Not by `npm pack` of its tarball either: the registry's document for a version
 * is the package.json it was published with, and reading it downloads no tarball, writes no
 * file and can run no script. A published version never changes, so a cached copy may answer
 * (`--prefer-offline`); CI reaches the registry.
 */
function upstreamPlatformPackages(): Record<string, string> {
  const view = spawnSync(
    'npm',
    [
      'view',
      `@foundry-rs/anvil@${ANVIL_VERSION}`,
      'optionalDependencies',
      '--json',
      '--prefer-offline',
    ],
    { encoding: 'utf8' },
  );
  expect(view.status, view.stderr).toBe(0);
  return JSON.parse(view.stdout) as Record<string, string>;
}

describe('the anvil packages', () => {
  const upstream = upstreamPlatformPackages();

  it('are those @foundry-rs/anvil lists, all optional dependencies at the release serve expects', () => {
    expect(Object.keys(upstream).length).toBeGreaterThan(0);
    const manifest = JSON.parse(readFileSync('package.json', 'utf8')) as {
      optionalDependencies: Record<string, string>;
    };
    expect(manifest.optionalDependencies).toEqual(
      Object.fromEntries(Object.keys(upstream).map((name) => [name, ANVIL_VERSION])),
    );
    expect(Object.values(upstream)).toEqual(Object.keys(upstream).map(() => ANVIL_VERSION));
  });

  it('are in the lockfile for their platform, so npm ci installs the one that fits, and serve finds it by that name', () => {
    const lock = JSON.parse(readFileSync('package-lock.json', 'utf8')) as {
      packages: Record<
        string,
        { version: string; optional?: boolean; os?: string[]; cpu?: string[] }
      >;
    };
    for (const name of Object.keys(upstream)) {
      const entry = lock.packages[`node_modules/${name}`];
      expect(entry, name).toMatchObject({ version: ANVIL_VERSION, optional: true });
      expect(entry?.os, name).toHaveLength(1);
      expect(entry?.cpu, name).toHaveLength(1);
      // The name serve looks for on that platform (Node's names for it) is this package's.
      expect(anvilPackage(entry?.os?.[0], entry?.cpu?.[0])).toBe(name);
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
