import { randomUUID } from 'node:crypto';
import { databaseCheckpoints } from './chain/checkpoint-store.ts';
import { databaseMnemonic } from './chain/mnemonic.ts';
import { StartupError } from './errors.ts';
import type { SandboxOptions } from './options.ts';
import type { RuntimeOptions } from './runtime.ts';
import type { Store } from './store/index.ts';
import { createPostgresBackend, openPostgresStore, redactedUrl } from './store/postgres.ts';

export { redactedUrl };

/**
 * The writer's side of a sandbox kept in a PostgreSQL database (`serve --database URL`): the
 * store, the chain's checkpoints, the sealed wallet mnemonic and the index all in the one
 * database, nothing in a state dir.
 */

/** The URL schemes `--database` takes. */
const POSTGRES_SCHEMES = new Set(['postgres:', 'postgresql:']);

/**
 * Why `url` is not a database `serve --database` can use, or undefined when it is one. The
 * answer never holds the URL's password.
 */
export function databaseUrlProblem(url: string): string | undefined {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return 'is not a URL; give postgres://USER@HOST:PORT/DB';
  }
  if (!POSTGRES_SCHEMES.has(parsed.protocol)) {
    return `is a ${parsed.protocol.replace(/:$/, '')}:// URL; give a PostgreSQL one, postgres://USER@HOST:PORT/DB`;
  }
  return undefined;
}

/** The options that have no meaning with a database, refused rather than ignored. */
export function checkDatabaseOptions(options: SandboxOptions): void {
  const url = options.database as string;
  const problem = databaseUrlProblem(url);
  if (problem) throw new StartupError(`--database ${redactedUrl(url)} ${problem}`);
  const refused: Array<[unknown, string]> = [
    [options.state, '--state (the database keeps the whole sandbox: there is no state dir)'],
    [options.fromFile, '--from (an export is started in a state dir)'],
    [options.rpcUrl, '--rpc-url (a sandbox in a database runs its own chain)'],
  ];
  for (const [given, what] of refused) {
    if (given !== undefined) throw new StartupError(`--database cannot be used with ${what}`);
  }
}

/** What of a URL's is a secret, for the log's scrubbing: its password. */
export function databaseUrlSecrets(url: string | undefined): string[] {
  if (url === undefined) return [];
  try {
    const parsed = new URL(url);
    const secrets = [decodeURIComponent(parsed.password), parsed.searchParams.get('password')];
    return secrets.filter((secret): secret is string => !!secret);
  } catch {
    return [];
  }
}

export interface DatabaseState {
  store: Store;
  /** Where the runtime keeps the checkpoints, the mnemonic and the index: the database. */
  kept: Required<Pick<RuntimeOptions, 'checkpoints' | 'mnemonic' | 'index'>>;
  /** Closes what the store does not: the checkpoints' connection. Once the runtime is closed. */
  close(): Promise<void>;
}

/**
 * Opens the sandbox in the database at `url` (its tables created or migrated).
 * The checkpoints get a backend of their own: a checkpoint's megabytes go over its connection
 * while block commits go on over the store's.
 */
export async function openDatabaseState(url: string): Promise<DatabaseState> {
  const store = await openPostgresStore(url);
  try {
    // The store's open brought the schema up to date: nothing to migrate again.
    const checkpointBackend = await createPostgresBackend(url, { migrate: async () => {} });
    return {
      store,
      kept: {
        checkpoints: databaseCheckpoints(checkpointBackend),
        mnemonic: databaseMnemonic(store.sql),
        index: { kind: 'postgres', url },
      },
      close: () => checkpointBackend.close(),
    };
  } catch (error) {
    await store.close();
    throw error;
  }
}

/** The sandbox's id, kept in the database's meta (there is no format file to name it). */
export async function databaseSandboxId(store: Store): Promise<string> {
  const recorded = await store.meta.get('sandbox_id');
  if (recorded) return recorded;
  const id = randomUUID();
  await store.meta.set('sandbox_id', id);
  return id;
}
