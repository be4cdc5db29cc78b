import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { BIN } from '../helpers/serve.ts';

/** Reports every heavy package the process resolves, through a module resolve hook. */
const WATCH = `data:text/javascript,${encodeURIComponent(`
import { registerHooks } from 'node:module';
registerHooks({
  resolve(specifier, context, next) {
    const result = next(specifier, context);
    if (/node_modules\\/(viem|fastify|@inquirer|solc|@foundry-rs|undici|conf)\\//.test(result.url)) {
      process.stderr.write('LOADED ' + result.url + '\\n');
    }
    return result;
  },
});`)}`;

describe('start-up', () => {
  it.each([['--version'], ['--help'], ['vaults', '--help'], ['serve', '--help']])(
    '%s loads none of viem, fastify, inquirer, anvil, solc, undici or conf',
    (...args) => {
      const result = spawnSync(process.execPath, ['--import', WATCH, BIN, ...args], {
        encoding: 'utf8',
      });
      expect(result.status).toBe(0);
      expect(result.stderr).not.toContain('LOADED');
      expect(result.stdout.length).toBeGreaterThan(0);
    },
  );
});
