/**
 * vitest's global setup for PostgreSQL (see postgres.ts): makes the directory of the run's
 * cluster and provides it to the test files as `postgresRoot`; nothing is started here. At the
 * end of the run, stops the cluster if a test file started one, and removes the directory.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestProject } from 'vitest/node';
import { stopCluster } from './postgres.ts';

export default function setup(project: TestProject) {
  const root = mkdtempSync(join(tmpdir(), 'agentctl-pg-'));
  project.provide('postgresRoot', root);
  return async () => {
    try {
      await stopCluster(root);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  };
}
