/**
 * The installed size: the package packed and installed as a user installs it (`npm pack`, then
 * `npm install -g` of the tarball into a fresh prefix; see scripts/packed-install.ts), next to
 * anvil's share of it and the issue's target of 100 MB. Part of `npm run bench`; on its own,
 * after `npm run build:dist`:
 *
 *   node bench/install-size.ts
 */
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { bytesUnder, packAndInstall, packagesUnder } from '../scripts/packed-install.ts';
import { anvilPackage } from '../src/sandbox/chain/anvil.ts';

/** The target, in bytes (MB as 10^6 bytes, as test/cli/install.test.ts holds it to). */
export const TARGET_INSTALLED_BYTES = 100 * 1000 * 1000;

export interface InstallSize {
  tarballBytes: number;
  installedBytes: number;
  /** Every package installed, agentctl included. */
  packages: number;
  anvil: { name: string; bytes: number } | undefined;
}

export function measureInstallSize(): InstallSize {
  const dir = mkdtempSync(join(tmpdir(), 'agentctl-bench-install-'));
  try {
    const installed = packAndInstall(dir);
    const dependencies = packagesUnder(installed.packageDir);
    const name = anvilPackage();
    return {
      tarballBytes: statSync(installed.tarball).size,
      installedBytes: bytesUnder(installed.prefix),
      packages: 1 + dependencies.length,
      anvil: dependencies.includes(name)
        ? { name, bytes: bytesUnder(join(installed.packageDir, 'node_modules', name)) }
        : undefined,
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Prints the figures as rows of `npm run bench` (`row` pads the name, as run.ts's does). */
export function printInstallSize(
  size: InstallSize,
  row: (name: string, ...cells: string[]) => void,
): void {
  const mb = (bytes: number) => (bytes / 1e6).toFixed(1).padStart(10);
  row(
    'installed (npm pack, then npm install -g of the tarball)',
    'MB'.padStart(10),
    'packages'.padStart(10),
    'target'.padStart(10),
  );
  row(
    `  agentctl and its dependencies (${size.installedBytes.toLocaleString('en')} bytes)`,
    mb(size.installedBytes),
    String(size.packages).padStart(10),
    `≤ ${TARGET_INSTALLED_BYTES / 1e6}`.padStart(10),
  );
  row(
    `  of which anvil (${size.anvil?.name ?? `${anvilPackage()}: not installed`})`,
    mb(size.anvil?.bytes ?? 0),
    (size.anvil ? '1' : '0').padStart(10),
  );
  row('  the tarball, compressed', mb(size.tarballBytes));
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  printInstallSize(measureInstallSize(), (name, ...cells) =>
    console.log(name.padEnd(58), ...cells),
  );
}
