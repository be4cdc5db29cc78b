/**
 * Builds dist/: the command line and the sandbox, bundled with esbuild into a few ES modules,
 * so that a start loads a handful of files instead of thousands (about half the start-up
 * time of `agentctl serve`). Dependencies are bundled too; what is loaded only by some
 * commands stays in chunks of its own, loaded on demand. So package.json lists them all as
 * devDependencies: an installed package holds dist/ and anvil's binary package, nothing else
 * (test/cli/install.test.ts). A module that must stay outside the bundle would have to become
 * a dependency again.
 *
 *   node scripts/bundle.ts
 */
import { rmSync } from 'node:fs';
import { builtinModules, createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build, type Plugin } from 'esbuild';

const require = createRequire(import.meta.url);
const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const outdir = join(root, 'dist');

/**
 * Node's built-in modules, taken with require() rather than an ES import. An ES import of a
 * built-in builds its namespace, which runs every lazy getter the module has: `node:fs` then
 * loads fs/promises and its streams, and `node:http` loads Node's copy of undici for
 * `http.WebSocket` (about 25 ms).
 *
 * A few are also loaded lazily, on first use, because a package on every command's path
 * imports them for rare work: commander takes `child_process` for external subcommands, and
 * copying `util`'s exports loads worker_threads and more. Their stand-in has an accessor for
 * each of the module's export names (known here, at build time) that requires the module on
 * first use.
 */
const LAZY_BUILTINS = new Set(['child_process', 'util']);

const builtinsByRequire: Plugin = {
  name: 'builtins-by-require',
  setup(build) {
    const builtins = new Set(builtinModules.flatMap((name) => [name, `node:${name}`]));
    build.onResolve({ filter: /.*/ }, (args) => {
      if (!builtins.has(args.path)) return undefined;
      // The require() inside the stand-in below stays a real require().
      if (args.namespace === 'builtin') return { path: args.path, external: true };
      return { path: args.path.replace(/^node:/, ''), namespace: 'builtin' };
    });
    build.onLoad({ filter: /.*/, namespace: 'builtin' }, (args) => {
      const specifier = JSON.stringify(`node:${args.path}`);
      if (!LAZY_BUILTINS.has(args.path)) {
        return { contents: `module.exports = require(${specifier});`, loader: 'js' };
      }
      const names = JSON.stringify(Object.getOwnPropertyNames(require(`node:${args.path}`)));
      return {
        loader: 'js',
        // Accessors, not a Proxy: reads and writes reach the real module, loaded on first use.
        contents: `let loaded;
const load = () => (loaded ??= require(${specifier}));
for (const name of ${names}) {
  Object.defineProperty(exports, name, {
    configurable: true,
    enumerable: true,
    get: () => load()[name],
    set: (value) => { load()[name] = value; },
  });
}`,
      };
    });
  },
};

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
  plugins: [builtinsByRequire],
  // Some dependencies are CommonJS and call require(); give the ES bundle one.
  banner: {
    js: "import { createRequire as __agentctlCreateRequire } from 'node:module'; const require = __agentctlCreateRequire(import.meta.url);",
  },
});
