import { afterEach, beforeAll, beforeEach } from 'vitest';
import { RestoreResult, SnapshotInfo } from '../../src/api/schemas/sandbox.ts';
import type { TestSandbox } from './sandbox.ts';

/**
 * Test isolation through the sandbox's own snapshots (issue 23 §4): a file builds its shared
 * state once, takes a named snapshot of it, and restores it before each test that needs that
 * state and nothing else, whatever ran before it and in whatever order.
 */

/** One admin request: how the helper reaches a sandbox, in process or over HTTP. */
export type AdminRequest = (
  method: 'POST',
  path: string,
  body?: object,
) => Promise<{ status: number; body: unknown }>;

/** The admin API of an in-process sandbox (test/helpers/sandbox.ts), through app.inject. */
export function adminInProcess(sandbox: () => TestSandbox): AdminRequest {
  return async (method, path, body) => {
    // Imported when used: a file that tests a spawned serve need not load the whole sandbox.
    const { ADMIN_TOKEN } = await import('./sandbox.ts');
    const response = await sandbox().app.inject({
      method,
      url: path,
      headers: { 'x-admin-token': ADMIN_TOKEN },
      ...(body ? { payload: body } : {}),
    });
    return { status: response.statusCode, body: response.json() };
  };
}

/** The admin API of a spawned `agentctl serve` at `url`, over HTTP. */
export function adminOverHttp(url: () => string, adminToken: string): AdminRequest {
  return async (method, path, body) => {
    const response = await fetch(`${url()}${path}`, {
      method,
      headers: {
        'x-admin-token': adminToken,
        ...(body ? { 'content-type': 'application/json' } : {}),
      },
      ...(body ? { body: JSON.stringify(body) } : {}),
    });
    return { status: response.status, body: await response.json() };
  };
}

export interface Snapshot {
  /** The snapshot's block, once taken. */
  blockNumber(): number;
  /**
   * Puts the sandbox back as it was when the snapshot was taken. Skipped when no test has run
   * since it was taken or last restored: nothing can have changed it then.
   */
  restore(): Promise<void>;
  /** Restores the snapshot before each test of the enclosing describe (or file). */
  restoreBeforeEach(): void;
}

/**
 * Takes snapshot `name` in a beforeAll hook registered where this is called: call it after
 * the hooks that build the file's shared state (before hooks run in the order they were
 * registered), and at the file's top level. Restoring is asked for by the tests that need
 * it, with `restoreBeforeEach()` in their describe or `restore()`.
 *
 * Mind what a restore takes back: API keys and node keys issued after the snapshot get 401,
 * GraphQL subscription sockets are closed (4205), and the clock's offset is the snapshot's.
 */
export function useSnapshot(admin: AdminRequest, name: string): Snapshot {
  let block: number | undefined;
  /** Whether a test has run since the snapshot was taken or last restored. */
  let dirty = false;
  beforeAll(async () => {
    const taken = await admin('POST', '/sandbox/snapshots', { name, replace: true });
    if (taken.status !== 200) {
      throw new Error(`snapshot ${name} failed: ${taken.status} ${JSON.stringify(taken.body)}`);
    }
    block = SnapshotInfo.parse(taken.body).block_number;
    dirty = false;
  });
  afterEach(() => {
    dirty = true;
  });
  const snapshot: Snapshot = {
    blockNumber() {
      if (block === undefined) throw new Error(`snapshot ${name} has not been taken yet`);
      return block;
    },
    async restore() {
      const at = snapshot.blockNumber();
      if (!dirty) return;
      const restored = await admin('POST', `/sandbox/snapshots/${name}/restore`);
      if (restored.status !== 200) {
        throw new Error(
          `restoring snapshot ${name} failed: ${restored.status} ${JSON.stringify(restored.body)}`,
        );
      }
      const result = RestoreResult.parse(restored.body);
      if (result.block_number !== at) {
        throw new Error(`snapshot ${name} restored at block ${result.block_number}, not ${at}`);
      }
      dirty = false;
    },
    restoreBeforeEach() {
      beforeEach(() => snapshot.restore());
    },
  };
  return snapshot;
}
