/**
 * Writes openapi.json: the OpenAPI 3.1 document `agentctl serve` answers at GET /openapi.json,
 * generated from the routes' zod schemas. It builds the real app on a throwaway sandbox (its
 * own anvil) and asks it for the document. test/sandbox/openapi.test.ts fails when the
 * committed file and the served document differ.
 *
 *   node scripts/build-openapi.ts          regenerate openapi.json
 *   node scripts/build-openapi.ts --check  exit 1 if it is out of date
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildApp } from '../src/sandbox/app.ts';
import { createSandboxClock } from '../src/sandbox/clock.ts';
import { hashAdminToken } from '../src/sandbox/plugins/auth.ts';
import { OPENAPI_PATH } from '../src/sandbox/plugins/openapi.ts';
import { startRuntime } from '../src/sandbox/runtime.ts';
import { openStore } from '../src/sandbox/store/index.ts';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
export const OPENAPI_FILE = join(root, 'openapi.json');

/** The document as committed: two-space JSON and a final newline. */
export function renderOpenApi(document: unknown): string {
  return `${JSON.stringify(document, null, 2)}\n`;
}

async function servedDocument(): Promise<unknown> {
  const dir = mkdtempSync(join(tmpdir(), 'agentctl-openapi-'));
  const quiet = { info() {}, warn() {}, error() {} };
  const store = openStore(join(dir, 'sandbox.db'), { durable: false });
  const clock = await createSandboxClock(store.meta);
  const sandboxId = randomUUID();
  const runtime = await startRuntime({
    stateDir: dir,
    persistent: false,
    clock,
    store,
    sandboxId,
    log: quiet,
  });
  try {
    const app = await buildApp({
      store,
      clock,
      chain: runtime.chain,
      index: runtime.index,
      onboarder: runtime.onboarder,
      adminTokenHash: hashAdminToken(randomUUID()),
      snapshots: runtime.snapshots,
      stateDir: dir,
      persistent: false,
      rateLimit: true,
      trustProxy: false,
      logger: false,
      connections: { maxConnections: 8, requestTimeoutMs: 30_000 },
    });
    await app.ready();
    const document = (await app.inject({ url: OPENAPI_PATH })).json();
    await app.close();
    return document;
  } finally {
    await runtime.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const rendered = renderOpenApi(await servedDocument());
  if (process.argv.includes('--check')) {
    if (readFileSync(OPENAPI_FILE, 'utf8') !== rendered) {
      console.error('openapi.json is out of date: run `npm run build:openapi`');
      process.exit(1);
    }
  } else {
    writeFileSync(OPENAPI_FILE, rendered);
    console.log(`wrote ${OPENAPI_FILE}`);
  }
}
