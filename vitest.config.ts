import { createRequire } from 'node:module';
import { availableParallelism } from 'node:os';
import { defineConfig } from 'vitest/config';

const require = createRequire(import.meta.url);

/**
 * The files run a second time on PostgreSQL (issue 25: "the store, the indexer, Part A, /v1,
 * GraphQL and the durability tests run against SQLite and against PostgreSQL"). In that pass
 * AGENTCTL_TEST_BACKEND=postgres makes every test sandbox (test/helpers/sandbox.ts) and every
 * serve on a test's state (test/helpers/serve.ts) keep its state in a fresh database of the
 * run's throwaway cluster. The store's and the indexer's own files run both backends inside
 * them (describe.each over test/helpers/store-backends.ts), so they are not listed here.
 */
const ON_POSTGRES_TOO = [
  // Part A
  'test/sandbox/public-reads.test.ts',
  'test/sandbox/access.test.ts',
  'test/sandbox/errors.test.ts',
  'test/sandbox/registration.test.ts',
  'test/sandbox/input-edges.test.ts',
  'test/sandbox/sandbox-time.test.ts',
  'test/sandbox/idempotency.test.ts',
  // /v1
  'test/sandbox/data-api.test.ts',
  'test/sandbox/data-vaults.test.ts',
  'test/sandbox/data-history-bound.test.ts',
  'test/sandbox/data-rate-limit.test.ts',
  // GraphQL
  'test/sandbox/graphql.test.ts',
  'test/sandbox/graphql-hostile.test.ts',
  // durability: restores, kill -9, a killed or reset anvil, writes retried across a crash
  'test/sandbox/snapshots.test.ts',
  'test/cli/serve-recovery.test.ts',
  'test/cli/serve-idempotency.test.ts',
];

export default defineConfig({
  resolve: {
    // One graphql for everyone, as in the bundle and under plain Node: mercurius require()s
    // its CommonJS build, and a second copy (the ES build vite would pick) makes graphql-js
    // refuse schemas built by the other ("from another module or realm").
    alias: [{ find: /^graphql$/, replacement: require.resolve('graphql') }],
  },
  test: {
    projects: [
      {
        extends: true,
        // Said, not left unset: vitest sets a project's env, and never unsets another's.
        test: {
          name: 'sqlite',
          include: ['test/**/*.test.ts'],
          env: { AGENTCTL_TEST_BACKEND: 'sqlite' },
        },
      },
      {
        extends: true,
        test: {
          name: 'postgres',
          include: ON_POSTGRES_TOO,
          env: { AGENTCTL_TEST_BACKEND: 'postgres' },
        },
      },
    ],
    // A throwaway PostgreSQL for the files that ask for one, started on first use.
    globalSetup: ['test/helpers/postgres-global.ts'],
    // Most files spend much of their time waiting on child processes (anvil, a spawned serve,
    // the built CLI), so on a 2-core machine vitest's default of cores - 1 workers leaves half
    // of it idle: two workers take npm test from about 6 minutes to about 4.
    maxWorkers: Math.max(2, availableParallelism() - 1),
    // A worker runs file after file without being replaced: each file's imports (fastify,
    // viem, mercurius: about a second) are loaded once per worker rather than once per file.
    // No file mocks modules or changes process.env, and each builds its own sandbox.
    isolate: false,
    testTimeout: 30_000,
    hookTimeout: 30_000,
  },
});
