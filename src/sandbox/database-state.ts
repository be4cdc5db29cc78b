import { randomUUID } from 'node:crypto';
import { databaseCheckpoints } from './chain/checkpoint-store.ts';
import { type DatabaseMnemonicStore, databaseMnemonic } from './chain/mnemonic.ts';
import { StartupError } from './errors.ts';
import type { SandboxOptions } from './options.ts';
import type { RuntimeOptions } from './runtime.ts';
import type { Store } from './store/index.ts';
import { createPostgresBackend, openPostgresStore, redactedUrl } from './store/postgres.ts';
import type { SqlBackend } from './store/sql.ts';
import {
  createWriterLock,
  type WriterLock,
  WriterLockedError,
  type WriterTakenOverError,
} from './team/writer-lock.ts';

export { importIntoDatabase } from './snapshots/database.ts';
export { probeDatabase } from './team/database-health.ts';
export { redactedUrl, WriterLockedError };

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
    [options.rpcUrl, '--rpc-url (a sandbox in a database runs its own chain)'],
  ];
  for (const [given, what] of refused) {
    if (given !== undefined) throw new StartupError(`--database cannot be used with ${what}`);
  }
}

/** What of a URL's is a secret, for the log's scrubbing: its passwords (?sslpassword= too). */
export function databaseUrlSecrets(url: string | undefined): string[] {
  if (url === undefined) return [];
  try {
    const parsed = new URL(url);
    const secrets = [
      decodeURIComponent(parsed.password),
      ...[...parsed.searchParams].filter(([name]) => /password/i.test(name)).map(([, v]) => v),
    ];
    return secrets.filter((secret): secret is string => !!secret);
  } catch {
    return [];
  }
}

export interface DatabaseState {
  store: Store;
  /** Where the runtime keeps the checkpoints, the mnemonic and the index, and the index's fence. */
  kept: Required<
    Pick<RuntimeOptions, 'checkpoints' | 'indexStorage' | 'fenceIndex' | 'beforeStoreClose'>
  > & { mnemonic: DatabaseMnemonicStore };
  /** The writer lock, held on the store's write connection for as long as it is open. */
  lock: WriterLock;
  /** Closes what the store does not: the checkpoints' connection. Once the runtime is closed. */
  close(): Promise<void>;
}

/**
 * Opens the sandbox in the database at `url` (its tables created or migrated) as its one
 * writer: the writer lock is taken on the store's write connection before anything is written,
 * and a writer that holds it refuses the start (WriterLockedError, naming it). `onLost` is told
 * when another writer took over while this one's connection was lost: every write fails from
 * then on, and the process should stop.
 *
 * The checkpoints get a backend of their own: a checkpoint's megabytes go over its connection
 * while block commits go on over the store's. The lock does not cover that connection, nor the
 * index's: each of their transactions is fenced (WriterLock.fence), so that a writer that lost
 * the lock writes no checkpoint, prunes none, and indexes nothing once another holds it.
 */
export async function openDatabaseState(
  url: string,
  onLost: (error: WriterTakenOverError) => void,
): Promise<DatabaseState> {
  const lock = createWriterLock({ database: redactedUrl(url), onLost });
  // Refused with WriterLockedError, having written nothing, while another writer holds the lock.
  const store = await openPostgresStore(url, lock.hooks);
  try {
    // The store's open brought the schema up to date: nothing to migrate again.
    const checkpointBackend = await createPostgresBackend(url, { migrate: async () => {} });
    return {
      store,
      lock,
      kept: {
        checkpoints: databaseCheckpoints(fenced(checkpointBackend, lock)),
        mnemonic: databaseMnemonic(store.sql),
        indexStorage: { kind: 'postgres', url },
        fenceIndex: (tx) => lock.fence(tx),
        // Replicas learn that this writer is going once its last checkpoint is written (the row
        // goes; the lock goes with the store's connection, just after).
        beforeStoreClose: () => lock.release(),
      },
      close: () => checkpointBackend.close(),
    };
  } catch (error) {
    await lock.release();
    await store.close();
    throw error;
  }
}

/**
 * `backend` with every write in a transaction fenced by the writer lock: a checkpoint's row, and
 * a prune, are written only while this process is the writer. Reads go through as they are.
 */
function fenced(backend: SqlBackend, lock: WriterLock): SqlBackend {
  return {
    ...backend,
    run: (sql, ...params) =>
      backend.transaction(async (tx) => {
        await lock.fence(tx);
        return tx.run(sql, ...params);
      }),
    transaction: (work) =>
      backend.transaction(async (tx) => {
        await lock.fence(tx);
        return work(tx);
      }),
  };
}

/** The sandbox's id, kept in the database's meta (there is no format file to name it). */
export async function databaseSandboxId(store: Store): Promise<string> {
  const recorded = await store.meta.get('sandbox_id');
  if (recorded) return recorded;
  const id = randomUUID();
  await store.meta.set('sandbox_id', id);
  return id;
}
