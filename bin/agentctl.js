#!/usr/bin/env node
// Version gate first: this file must parse and run on any Node still in use,
// so it uses nothing newer than ES2017 and imports nothing until the check passes.
const required = [22, 22, 2];
const current = process.versions.node.split('.').map(Number);
let older = false;
for (let i = 0; i < required.length; i++) {
  if (current[i] !== required[i]) {
    older = current[i] < required[i];
    break;
  }
}
if (older) {
  process.stderr.write(
    `agentctl requires Node.js ${required.join('.')} or newer; this is Node.js ${process.versions.node}.\n`,
  );
  process.exit(1);
}

// `agentctl --version` alone is answered here, without loading the command line at all.
const args = process.argv.slice(2);
if (args.length === 1 && (args[0] === '--version' || args[0] === '-V')) {
  import('node:fs').then((fs) => {
    const pkg = JSON.parse(fs.readFileSync(new URL('../package.json', import.meta.url), 'utf8'));
    process.stdout.write(`${pkg.version}\n`);
  });
} else {
  start();
}

function start() {
  // Compiled code is cached across runs (in the OS temp dir): later starts skip compiling.
  import('node:module')
    .then((module) => {
      if (module.enableCompileCache) module.enableCompileCache();
    })
    .catch(() => undefined)
    .then(() => import('../dist/main.js'))
    .then(
      (cli) => cli.main(process.argv),
      (error) => {
        const notBuilt =
          error && error.code === 'ERR_MODULE_NOT_FOUND' && /dist/.test(error.message);
        process.stderr.write(
          notBuilt
            ? 'agentctl is not built: run `npm ci` (or `npm run build`) in its directory.\n'
            : `agentctl failed to start: ${error}\n`,
        );
        process.exit(1);
      },
    );
}
