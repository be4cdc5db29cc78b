import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, normalize } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

/** What `npm pack` would put in the package (no scripts run: dist/ is already built). */
const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

function packedFiles(): string[] {
  const packed = spawnSync('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], {
    cwd: ROOT,
    encoding: 'utf8',
  });
  expect(packed.status, packed.stderr).toBe(0);
  const [report] = JSON.parse(packed.stdout) as Array<{ files: Array<{ path: string }> }>;
  return (report?.files ?? []).map((file) => file.path);
}

/** The files a Markdown document links to by relative path, from the package's root. */
function linkedFiles(document: string): string[] {
  const text = readFileSync(join(ROOT, document), 'utf8');
  return [...text.matchAll(/\]\(((?!https?:|#|mailto:)[^)#\s]+)(?:#[^)]*)?\)/g)].map((match) =>
    normalize(join(dirname(document), match[1] as string)),
  );
}

describe('the package', () => {
  const files = packedFiles();

  it('may be published, under the license it names, which it holds', () => {
    const manifest = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8'));
    expect(manifest.private).toBeUndefined();
    expect(manifest.license).toBe('MIT');
    expect(files).toContain('LICENSE');
    expect(readFileSync(join(ROOT, 'LICENSE'), 'utf8')).toMatch(/^MIT License/);
  });

  it('holds every file the README and the docs link to', () => {
    const documents = [
      'README.md',
      ...readdirSync(join(ROOT, 'docs')).map((name) => `docs/${name}`),
    ];
    for (const document of documents) {
      expect(files, document).toContain(document);
      for (const linked of linkedFiles(document))
        expect(files, `${document} → ${linked}`).toContain(linked);
    }
  });

  it('needs nothing at run time but anvil: dist/ bundles every other module it runs', () => {
    const manifest = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8'));
    expect(manifest.dependencies ?? {}).toEqual({});
    expect(manifest.peerDependencies ?? {}).toEqual({});
    for (const name of Object.keys(manifest.optionalDependencies))
      expect(name).toMatch(/^@foundry-rs\/anvil-/);
  });

  it('runs without source maps, and ships none', () => {
    expect(files.filter((file) => file.endsWith('.map'))).toEqual([]);
    expect(files).toContain('bin/agentctl.js');
    expect(files.some((file) => file.startsWith('dist/') && file.endsWith('.js'))).toBe(true);
  });
});
