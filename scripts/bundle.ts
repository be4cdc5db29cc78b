/**
 * Builds dist/: the command line and the sandbox, bundled with esbuild into a few ES modules,
 * so that a start loads a handful of files instead of thousands (about half the start-up
 * time of `agentctl serve`). Dependencies are bundled too; what is loaded only by some
 * commands stays in chunks of its own, loaded on demand.
 *
 *   node scripts/bundle.ts
 */
import { rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const outdir = join(root, 'dist');

rmSync(outdir, { recursive: true, force: true });
await build({
  entryPoints: {
    main: join(root, 'src/cli/main.ts'),
    // Loaded by src/sandbox/signatures/pool.ts as ./worker.js next to itself.
    worker: join(root, 'src/sandbox/signatures/worker.ts'),
  },
  outdir,
  bundle: true,
  splitting: true,
  platform: 'node',
  format: 'esm',
  target: 'node22',
  sourcemap: true,
  logLevel: 'warning',
  // Some dependencies are CommonJS and call require(); give the ES bundle one.
  banner: {
    js: "import { createRequire as __agentctlCreateRequire } from 'node:module'; const require = __agentctlCreateRequire(import.meta.url);",
  },
});
