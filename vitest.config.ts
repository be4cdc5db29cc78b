import { createRequire } from 'node:module';
import { availableParallelism } from 'node:os';
import { defineConfig } from 'vitest/config';

const require = createRequire(import.meta.url);

export default defineConfig({
  resolve: {
    // One graphql for everyone, as in the bundle and under plain Node: mercurius require()s
    // its CommonJS build, and a second copy (the ES build vite would pick) makes graphql-js
    // refuse schemas built by the other ("from another module or realm").
    alias: [{ find: /^graphql$/, replacement: require.resolve('graphql') }],
  },
  test: {
    include: ['test/**/*.test.ts'],
    // A throwaway PostgreSQL for the files that ask for one, started on first use.
    globalSetup: ['test/helpers/postgres-global.ts'],
    // Most files spend much of their time waiting on child processes (anvil, a spawned serve,
    // the built CLI), so on a 2-core machine vitest's default of cores - 1 workers leaves half
    // of it idle: two workers take npm test from about 6 minutes to about 4.
    maxWorkers: Math.max(2, availableParallelism() - 1),
    testTimeout: 30_000,
    hookTimeout: 30_000,
  },
});
