/**
 * Snapshot and restore figures for `npm run bench` (issue 23 §1): how long POST
 * /sandbox/snapshots and POST /sandbox/snapshots/NAME/restore take on a --state sandbox of a
 * given size, end to end over HTTP, next to what a user has without them: a new serve plus
 * registering the same agents again. Printed by run.ts, never asserted.
 */
import { ADMIN_TOKEN, deposit, fmt, percentile, type Row, type Sandbox } from './common.ts';

/** Snapshots and restores measured at each size: the median and the slowest are printed. */
const ROUNDS = 7;
/** Deposits between a snapshot and its restore: the restore has something to undo. */
const WRITES_BETWEEN = 3;

export interface SnapshotFigures {
  agents: number;
  snapshotMs: number[];
  restoreMs: number[];
  /** What the restore said it took (restored_in_ms), without HTTP. */
  restoreServerMs: number[];
  sizeBytes: number;
}

/** An admin API request; anything but 200 throws. */
export async function admin(base: string, method: string, path: string, body?: object) {
  const response = await fetch(`${base}${path}`, {
    method,
    headers: {
      'x-admin-token': ADMIN_TOKEN,
      ...(body && { 'content-type': 'application/json' }),
    },
    ...(body && { body: JSON.stringify(body) }),
  });
  // biome-ignore lint/suspicious/noExplicitAny: bench reads a few known fields
  const answer = (await response.json()) as any;
  if (response.status !== 200) {
    throw new Error(`${method} ${path} answered ${response.status}: ${JSON.stringify(answer)}`);
  }
  return answer;
}

/** Takes and restores a snapshot ROUNDS times on `sandbox`, with writes in between. */
export async function measureSnapshots(sandbox: Sandbox): Promise<SnapshotFigures> {
  const figures: SnapshotFigures = {
    agents: sandbox.agents,
    snapshotMs: [],
    restoreMs: [],
    restoreServerMs: [],
    sizeBytes: 0,
  };
  const name = `bench-${sandbox.agents}`;
  const key = sandbox.keys[0] as string;
  for (let round = 0; round < ROUNDS; round++) {
    let started = performance.now();
    const taken = await admin(sandbox.url, 'POST', '/sandbox/snapshots', { name, replace: true });
    figures.snapshotMs.push(performance.now() - started);
    figures.sizeBytes = taken.size_bytes;
    for (let i = 0; i < WRITES_BETWEEN; i++) await deposit(sandbox.url, key);
    started = performance.now();
    const restored = await admin(sandbox.url, 'POST', `/sandbox/snapshots/${name}/restore`);
    figures.restoreMs.push(performance.now() - started);
    figures.restoreServerMs.push(restored.restored_in_ms);
    if (restored.block_number !== taken.block_number) {
      throw new Error(`restored to block ${restored.block_number}, not ${taken.block_number}`);
    }
  }
  // The sandbox holds no snapshot it did not have: the rest of the bench sees the same state.
  await admin(sandbox.url, 'DELETE', `/sandbox/snapshots/${name}`);
  return figures;
}

/** The rows: snapshot and restore at each size, next to a new serve plus registering again. */
export function printSnapshots(
  all: SnapshotFigures[],
  alternative: { serveStartMs: number; registrationsPerSecond: number },
  row: Row,
): void {
  const targets: Record<string, [string, string]> = {
    small: ['≤ 100', '≤ 300'],
    large: ['≤ 1000', '≤ 1000'],
  };
  row(
    `snapshots (--state; median / slowest of ${ROUNDS}, over HTTP)`,
    'median'.padStart(10),
    'slowest'.padStart(10),
    'target'.padStart(10),
  );
  all.forEach((figures, i) => {
    const [snapshotTarget, restoreTarget] = targets[i === 0 ? 'small' : 'large'] as [
      string,
      string,
    ];
    const sorted = (values: number[]) => [...values].sort((a, b) => a - b);
    const snapshot = sorted(figures.snapshotMs);
    const restore = sorted(figures.restoreMs);
    const server = sorted(figures.restoreServerMs);
    row(
      `  snapshot, ${figures.agents} agents (${(figures.sizeBytes / 1024 / 1024).toFixed(1)} MB), ms`,
      fmt(percentile(snapshot, 50)),
      fmt(snapshot.at(-1) ?? Number.NaN),
      snapshotTarget.padStart(10),
    );
    row(
      `  restore, ${figures.agents} agents, ms`,
      fmt(percentile(restore, 50)),
      fmt(restore.at(-1) ?? Number.NaN),
      restoreTarget.padStart(10),
    );
    row(
      '    of which in the sandbox (restored_in_ms)',
      fmt(percentile(server, 50)),
      fmt(server.at(-1) ?? Number.NaN),
    );
    row(
      `  peer: a new serve + registering ${figures.agents} agents again, ms`,
      fmt(
        alternative.serveStartMs + (figures.agents / alternative.registrationsPerSecond) * 1000,
        0,
      ),
    );
  });
  row(
    `    (the serve start and the registration rate measured in this run; deposits, strategies and votes not counted)`,
  );
}
