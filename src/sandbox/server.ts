import { randomBytes, randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import { join, resolve } from 'node:path';
import { formatHostPort } from './address.ts';
import { recordsAnvil, stopAbandonedAnvil, stopAnvilsOf } from './chain/anvil.ts';
import type { ChainLogger } from './chain/index.ts';
import { createSandboxClock } from './clock.ts';
import type { DatabaseState } from './database-state.ts';
import { StartupError } from './errors.ts';
import { type GraphiqlMode, type SandboxOptions, TOKEN_NOT_LOGGED } from './options.ts';
import { hashAdminToken } from './plugins/auth.ts';
import { fitConnectionCap, openFileLimit } from './plugins/connections.ts';
import { LISTENING_LOG_TEXT, loggerOptions, rpcUrlSecrets } from './plugins/logging.ts';
import type { App } from './routes/types.ts';
import { type RuntimeOptions, type SandboxRuntime, startRuntime } from './runtime.ts';
import { checkEmptyForImport, importExport, readExport } from './snapshots/export-file.ts';
import { resumeRestore } from './snapshots/index.ts';
import { openStateDir, reapAbandonedTempDirs, type StateDir } from './state-dir.ts';
import { openStore, type Store } from './store/index.ts';

/** How long shutdown waits for handlers still running once every connection is closed. */
const SHUTDOWN_HANDLER_WAIT_MS = 15_000;

export interface RunningSandbox {
  url: string;
  rpcUrl: string;
  /** Undefined when a --state sandbox keeps the token of an earlier start (only its hash is stored). */
  adminToken: string | undefined;
  adminTokenGenerated: boolean;
  stateDir: string;
  persistent: boolean;
  /** The database that keeps the sandbox (serve --database), as it may be shown (no password). */
  database: string | undefined;
  /**
   * A replica (serve --replica): the writer it forwards writes to as it may be shown, or null
   * while none serves. Undefined on a writer.
   */
  writer?: string | null;
  /** Set when the connection cap was lowered to fit the open-file limit. */
  connectionCapNote: string | undefined;
  /**
   * Resolves when this writer lost the database's writer lock to another (its connection was
   * lost meanwhile): it refuses every write, and should stop. Never, on SQLite.
   */
  lost: Promise<Error>;
  app: App;
  close(): Promise<void>;
}

/** Opens the state, builds the app and listens. The caller owns shutdown via close(). */
export async function startSandbox(options: SandboxOptions): Promise<RunningSandbox> {
  if (options.replica) {
    if (options.database === undefined) {
      throw new StartupError('--replica needs --database: the database its writer keeps');
    }
    const { startReplica } = await import('./replica.ts');
    return startReplica(options);
  }
  // Fastify and the routes load while anvil starts and loads the chain.
  const loadingApp = import('./app.ts');
  loadingApp.catch(() => undefined);
  reapAbandonedTempDirs(recordsAnvil, stopAbandonedAnvil);
  const fileLimit = openFileLimit();
  const maxConnections = fitConnectionCap(options.maxConnections, fileLimit);
  // An export is read and checked whole before anything is written.
  const exported = options.fromFile === undefined ? undefined : await readExport(options.fromFile);
  if (exported && options.rpcUrl !== undefined) {
    throw new StartupError(
      '--from starts the sandbox on its own chain, as exported: it cannot be used with --rpc-url',
    );
  }
  const temporaryState = exported !== undefined && options.temporaryState === true;
  // Loaded only for a sandbox in a database: it brings PostgreSQL's driver.
  const team = options.database === undefined ? undefined : await import('./database-state.ts');
  if (team) team.checkDatabaseOptions(options);
  else if (exported && options.state !== undefined && !temporaryState) {
    checkEmptyForImport(resolve(options.state));
  }
  // A sandbox in a database keeps nothing on this machine: its writer's own files (anvil's pid
  // and state files, its log) go to a temporary work dir, removed at exit; a kill -9 leaves
  // one that the next start on this machine reaps (reapAbandonedTempDirs, above).
  const stateDir = openStateDir(options.database === undefined ? options.state : undefined, {
    temporary: temporaryState,
    stopAnvils: stopAnvilsOf,
  });
  const persistent = stateDir.persistent || options.database !== undefined;
  let store: Store | undefined;
  let database: DatabaseState | undefined;
  let runtime: SandboxRuntime | undefined;
  // The chain logs through the app's logger once there is one (recoveries happen later).
  let logger: Pick<App['log'], 'info' | 'warn' | 'error'> | undefined;
  const log: ChainLogger = {
    info: (message) => logger?.info(message),
    warn: (message) => (logger ? logger.warn(message) : process.stderr.write(`${message}\n`)),
    error: (message) => (logger ? logger.error(message) : process.stderr.write(`${message}\n`)),
  };
  let reportLost: (error: Error) => void = () => {};
  const lost = new Promise<Error>((resolveLost) => {
    reportLost = resolveLost;
  });
  try {
    let kept: Omit<
      RuntimeOptions,
      'stateDir' | 'persistent' | 'store' | 'clock' | 'sandboxId' | 'log'
    > = {};
    let sandboxId: string;
    if (team && options.database !== undefined) {
      database = await team.openDatabaseState(options.database, (error) => {
        log.error(`${error.message}; stopping`);
        reportLost(error);
      });
      store = database.store;
      // serve --from FILE --database URL: a new, empty database takes the export (as a
      // snapshot of its name, put in place); one that holds a sandbox is refused, unchanged.
      if (exported) await team.importIntoDatabase(exported, store, database.kept.mnemonic);
      sandboxId = await team.databaseSandboxId(store);
      kept = database.kept;
    } else {
      if (exported) await importExport(exported, stateDir.path);
      store = openStore(stateDir.databasePath, { durable: stateDir.persistent });
      // A restore a crash cut short is finished first (serve --from's is one).
      await resumeRestore(stateDir.path, store, join(stateDir.path, 'index.db'));
      sandboxId = await sandboxIdOf(stateDir, store);
    }
    const clock = await createSandboxClock(store.meta);
    runtime = await startRuntime({
      stateDir: stateDir.path,
      persistent,
      clock,
      store,
      sandboxId,
      log,
      rpcUrl: options.rpcUrl,
      deploymentFile: options.deploymentFile,
      ...kept,
    });
    if (!database && stateDir.sandboxId === undefined) {
      // The database's side of the new state is on disk before the format file names it.
      await store.sync();
      stateDir.markCreated(sandboxId);
    }
    const admin = await adminTokenFor(options.adminToken, persistent ? store : undefined);
    const { buildApp } = await loadingApp;
    const { chain } = runtime;
    const app = await buildApp({
      store,
      clock,
      chain,
      index: runtime.index,
      onboarder: runtime.onboarder,
      adminTokenHash: admin.hash,
      snapshots: runtime.snapshots,
      // /health says when the database cannot be reached (a load balancer's check), as a
      // replica's does.
      ...(database && team && { databaseHealth: team.probeDatabase(store.sql.standalone) }),
      stateDir: stateDir.path,
      persistent,
      ...(database &&
        team &&
        options.database !== undefined && {
          role: 'writer' as const,
          database: 'postgres' as const,
          stateShownAs: team.redactedUrl(options.database),
        }),
      rateLimit: options.rateLimit,
      // Servers that share a database count a client's requests once, whichever answers.
      ...(database
        ? { rateLimitCounts: 'database' as const }
        : options.rateLimitCounts && { rateLimitCounts: options.rateLimitCounts }),
      trustProxy: options.trustProxy,
      logger: loggerOptions(
        options.logLevel,
        process.stderr,
        [
          admin.token,
          ...rpcUrlSecrets(options.rpcUrl),
          ...(team?.databaseUrlSecrets(options.database) ?? []),
        ],
        admin.hash,
        options.logFormat,
      ),
      requestSummaries: options.logFormat === 'human',
      connections: { maxConnections, requestTimeoutMs: options.requestTimeoutMs },
      graphiql: graphiqlServed(options.graphiql ?? 'loopback', options.host),
    });
    logger = app.log;
    const openedStore = store;
    const started = runtime;
    const openedDatabase = database;
    app.addHook('onClose', async () => {
      // Handlers whose connection is gone may still be writing: let them finish first.
      await app.handlersDrained(SHUTDOWN_HANDLER_WAIT_MS);
      // The actors, the chain, the index, then the store (the writer lock's row goes just
      // before it: beforeStoreClose).
      await started.close();
      await openedDatabase?.close();
      stateDir.release();
    });
    // Fastify's own "Server listening at …" is dropped (see loggerOptions): the ready block
    // serve prints is the one word on where it listens.
    await app.listen({
      host: options.host,
      port: options.port,
      listenTextResolver: () => LISTENING_LOG_TEXT,
    });
    // Kept only now that the sandbox listens: a start that failed (a port in use, say) never
    // printed its token, and the next start must not point at it.
    if (admin.store) {
      await openedStore.meta.set('admin_token_sha256', admin.hash);
      await openedStore.sync();
    }
    const address = app.server.address();
    const port = typeof address === 'object' && address ? address.port : options.port;
    const url = `http://${formatHostPort(options.host, port)}`;
    stateDir.announce({ url, rpc_url: chain.rpcUrl });
    // Where replicas forward writes, once this writer takes them.
    await database?.lock.announce(advertisedUrl(options.advertiseUrl, options.host, port));
    return {
      url,
      rpcUrl: chain.rpcUrl,
      adminToken: admin.token,
      adminTokenGenerated: admin.generated,
      stateDir: stateDir.path,
      persistent,
      database:
        team && options.database !== undefined ? team.redactedUrl(options.database) : undefined,
      connectionCapNote:
        maxConnections < options.maxConnections
          ? `at most ${maxConnections} connections at once (open-file limit ${fileLimit})`
          : undefined,
      lost,
      app,
      close: () => app.close(),
    };
  } catch (error) {
    // A started runtime closes the store with the rest (and releases the lock); else here.
    if (runtime) await runtime.close();
    else {
      await database?.lock.release();
      await store?.close();
    }
    await database?.close();
    stateDir.release();
    throw error;
  }
}

/**
 * The admin token: the one given; else, with --state, the one of an earlier start (kept as a
 * hash in sandbox.db, so an exported AGENTCTL_ADMIN_TOKEN keeps working across restarts);
 * else a new one, printed once. A given token replaces the kept one. `store` says the hash
 * is to be kept; the caller keeps it once the sandbox listens.
 */
async function adminTokenFor(
  given: string | undefined,
  store: Store | undefined,
): Promise<{ token: string | undefined; hash: string; generated: boolean; store: boolean }> {
  const kept = await store?.meta.get('admin_token_sha256');
  if (given === undefined && kept !== undefined) {
    return { token: undefined, hash: kept, generated: false, store: false };
  }
  const token = given ?? randomBytes(24).toString('base64url');
  const hash = hashAdminToken(token);
  const changed = store !== undefined && hash !== kept;
  return { token, hash, generated: given === undefined, store: changed };
}

/**
 * The sandbox's id: the state's format file and sandbox.db must name the same one, or the
 * database is not this state's (lost and recreated, or copied from another sandbox).
 */
async function sandboxIdOf(stateDir: StateDir, store: Store): Promise<string> {
  const recorded = await store.meta.get('sandbox_id');
  if (stateDir.sandboxId === undefined) {
    // A new state, or a first start that was cut short before it wrote the format file.
    if (recorded) return recorded;
    const id = randomUUID();
    await store.meta.set('sandbox_id', id);
    return id;
  }
  if (recorded === stateDir.sandboxId) return recorded;
  throw new StartupError(
    recorded === undefined
      ? `${stateDir.databasePath} is missing or empty, but ${stateDir.path} holds a sandbox whose agents and chain log were kept there; ` +
          'restore sandbox.db from a backup, or start with a new --state directory'
      : `${stateDir.databasePath} belongs to another sandbox (${recorded}, not ${stateDir.sandboxId}); restore this sandbox's own sandbox.db`,
  );
}

/**
 * `agentctl serve`: start, print the ready line, and shut down gracefully on SIGINT or
 * SIGTERM (in-flight requests finish, the database closes, a temporary state dir is removed).
 * A second signal exits at once.
 */
export async function serveUntilSignalled(
  options: SandboxOptions,
  print: (line: string) => void,
  /**
   * A detached serve, whose stdout is its log file: the token line goes here instead (to the
   * parent that shows it once), called once with undefined when there is no token to show.
   * The log says only that the token was shown.
   */
  printToken?: (line: string | undefined) => void,
): Promise<void> {
  const sandbox = await startSandbox(options);
  // Handlers go in before the ready line, so a signal sent on seeing it is always graceful.
  const stopped = new Promise<void>((resolveStopped) => {
    let stopping = false;
    const stop = (signal: NodeJS.Signals) => {
      if (stopping) process.exit(130);
      stopping = true;
      // A notice, not data: stdout holds only the ready block.
      process.stderr.write(`${signal} received, shutting down\n`);
      sandbox.close().then(resolveStopped, (error: unknown) => {
        sandbox.app.log.error({ err: error }, 'shutdown failed');
        process.exitCode = 1;
        resolveStopped();
      });
    };
    process.on('SIGINT', stop);
    process.on('SIGTERM', stop);
    // Another writer took over while this one's connection was lost: nothing it does counts.
    sandbox.lost.then((error) => {
      if (stopping) return;
      stopping = true;
      // The log said why (the lock's loss): a notice, as for a signal.
      process.stderr.write(`writer lock lost (${error.name}), shutting down\n`);
      process.exitCode = 1;
      sandbox.close().then(resolveStopped, () => resolveStopped());
    });
  });
  if (sandbox.writer !== undefined) {
    print("admin token: the sandbox's, its writer's (give it with AGENTCTL_ADMIN_TOKEN)");
    print(`state: ${sandbox.database} (a read replica: nothing is kept on this machine)`);
    print(
      sandbox.writer === null
        ? 'writer: none serves now (writes answer 503 until one does)'
        : `writer: ${sandbox.writer} (writes are forwarded there)`,
    );
    if (sandbox.connectionCapNote) print(`connections: ${sandbox.connectionCapNote}`);
    if (printToken) printToken(undefined);
    print(`agentctl sandbox listening on ${sandbox.url}`);
    await stopped;
    return;
  }
  if (sandbox.adminTokenGenerated) {
    if (printToken) {
      printToken(`admin token: ${sandbox.adminToken}`);
      print(TOKEN_NOT_LOGGED);
    } else print(`admin token: ${sandbox.adminToken}`);
  } else if (sandbox.adminToken === undefined) {
    print(
      `admin token: the one printed at its first start (kept, hashed, in the ${sandbox.database ? 'database' : 'state'}; give it with AGENTCTL_ADMIN_TOKEN, or set a new one with --admin-token)`,
    );
  }
  if (sandbox.database) {
    print(`state: ${sandbox.database} (persistent)`);
    print(`work dir: ${sandbox.stateDir} (this writer's anvil files, removed at exit)`);
  } else {
    print(
      `state: ${sandbox.stateDir} (${sandbox.persistent ? 'persistent' : 'temporary, removed at exit'})`,
    );
  }
  print(`chain: ${sandbox.rpcUrl}`);
  if (sandbox.connectionCapNote) print(`connections: ${sandbox.connectionCapNote}`);
  if (printToken && !sandbox.adminTokenGenerated) printToken(undefined);
  print(`agentctl sandbox listening on ${sandbox.url}`);
  await stopped;
}

/**
 * The URL a writer records for replicas to forward writes to: `--advertise-url`, else its own
 * address, named by the machine's name when it listens on every interface (0.0.0.0, ::).
 */
export function advertisedUrl(given: string | undefined, host: string, port: number): string {
  if (given !== undefined) return given.replace(/\/+$/, '');
  const everywhere = host === '0.0.0.0' || host === '::' || host === '';
  return `http://${formatHostPort(everywhere ? hostname() : host, port)}`;
}

/** Whether GET /graphql serves GraphiQL: by default only where no one else can reach it. */
export function graphiqlServed(mode: GraphiqlMode, host: string): boolean {
  if (mode !== 'loopback') return mode === 'on';
  return host === 'localhost' || host === '::1' || /^127\.\d+\.\d+\.\d+$/.test(host);
}
