import { CHAIN_ID, CHAIN_NAME } from '../api/schemas/index.ts';
import { formatHostPort } from './address.ts';
import { GENESIS } from './chain/genesis.ts';
import type { SandboxChain } from './chain/sandbox-chain.ts';
import { createSandboxClock, type SandboxClock } from './clock.ts';
import { databaseUrlSecrets, redactedUrl } from './database-state.ts';
import { StartupError } from './errors.ts';
import type { SandboxOptions } from './options.ts';
import { hashAdminToken } from './plugins/auth.ts';
import { fitConnectionCap, openFileLimit } from './plugins/connections.ts';
import { LISTENING_LOG_TEXT, loggerOptions } from './plugins/logging.ts';
import type { App } from './routes/types.ts';
import { graphiqlServed, type RunningSandbox } from './server.ts';
import { checkPostgresSchema } from './store/migrations-postgres.ts';
import { openPostgresStore } from './store/postgres.ts';
import { probeDatabase } from './team/database-health.ts';
import { writerUrlFrom } from './team/forward-writes.ts';
import { openReplicaIndex, replicaIndexReads } from './team/replica-index.ts';
import { replicaOnboarder } from './team/replica-readiness.ts';
import { readWriter } from './team/writer-lock.ts';

/**
 * `agentctl serve --replica --database URL`: a read replica of a team sandbox. It runs no
 * chain, keeps nothing on this machine, takes no lock and migrates nothing: it answers reads
 * from the database the writer keeps (the store's rows, and the index through its commit feed,
 * team/replica-index.ts), forwards every write to the writer (team/forward-writes.ts), and
 * counts rate limits in the database, with the writer and the other replicas.
 */

/** How often the replica reads the sandbox clock's offset again, besides at each commit. */
const CLOCK_REFRESH_MS = 1000;
/** How long shutdown waits for handlers still running once every connection is closed. */
const SHUTDOWN_HANDLER_WAIT_MS = 15_000;

/** The options a replica has no use for: refused, not ignored. */
export function replicaOptionProblem(options: SandboxOptions): string | undefined {
  const refused: Array<[unknown, string]> = [
    [options.state, '--state (a replica keeps nothing on its machine)'],
    [options.fromFile, '--from (a replica serves the sandbox its writer runs)'],
    [options.rpcUrl, '--rpc-url (a replica runs no chain: its writer does)'],
    [options.advertiseUrl, '--advertise-url (only the writer records where it serves)'],
  ];
  for (const [given, what] of refused) {
    if (given !== undefined) return `--replica cannot be used with ${what}`;
  }
  return undefined;
}

/**
 * What a replica has of the chain: what the data API names (the contracts of the sandbox's
 * chain, its id and name) and sandbox time; everything that would send, mine or read the chain
 * is the writer's, and is never reached here (those requests are forwarded).
 */
function replicaChain(clock: SandboxClock): SandboxChain {
  const writersOnly = (what: string) => (): never => {
    throw new Error(`${what} is the writer's: a replica runs no chain`);
  };
  return {
    rpcUrl: '',
    chainId: CHAIN_ID,
    chainName: CHAIN_NAME,
    dev: true,
    get publicClient(): never {
      return writersOnly('the chain')();
    },
    deployment: GENESIS.deployment as unknown as SandboxChain['deployment'],
    get treasury(): never {
      return writersOnly('the treasury')();
    },
    get faucet(): never {
      return writersOnly('the faucet')();
    },
    wallet: writersOnly('a server-side wallet'),
    advanceTime: writersOnly('advancing the chain'),
    // The chain is the writer's: the replica's health is its database's.
    isConnected: async () => true,
    nowSeconds: () => clock.nowSeconds(),
    forgetNonces: () => undefined,
    checkpoint: writersOnly('a checkpoint'),
    standby: () => ({ status: 'none', block_number: null }),
    close: async () => undefined,
  };
}

/** Opens the replica's view of the database at `options.database`, builds the app and listens. */
export async function startReplica(options: SandboxOptions): Promise<RunningSandbox> {
  const url = options.database as string;
  const where = redactedUrl(url);
  const problem = replicaOptionProblem(options);
  if (problem) throw new StartupError(problem);
  const loadingApp = import('./app.ts');
  loadingApp.catch(() => undefined);
  const fileLimit = openFileLimit();
  const maxConnections = fitConnectionCap(options.maxConnections, fileLimit);
  let logger: Pick<App['log'], 'warn'> | undefined;
  const log = {
    warn: (message: string) =>
      logger ? logger.warn(message) : process.stderr.write(`${message}\n`),
  };
  // No migration: the schema must be this agentctl's, made by the writer.
  const store = await openPostgresStore(url, {
    migrate: checkPostgresSchema,
    applicationName: 'agentctl replica',
  });
  let index: Awaited<ReturnType<typeof openReplicaIndex>> | undefined;
  let refresh: NodeJS.Timeout | undefined;
  try {
    const kept = await store.meta.get('admin_token_sha256');
    if (kept === undefined) {
      throw new StartupError(
        `${where} holds no sandbox a writer serves yet: start the writer first (agentctl serve --database URL)`,
      );
    }
    // One admin token for the whole sandbox: the writer's (it checks the forwarded admin writes).
    if (options.adminToken !== undefined && hashAdminToken(options.adminToken) !== kept) {
      throw new StartupError(
        "--admin-token is not the sandbox's admin token (the one its writer was given): give the writer's, or none",
      );
    }
    index = await openReplicaIndex({ url, log });
    // Sandbox time is the writer's: its clock offset, read again at each commit (an advance
    // mines a block) and every CLOCK_REFRESH_MS.
    const clock = await createSandboxClock(store.meta);
    const reloadClock = () => {
      clock.reload().catch(() => undefined);
    };
    index.onCommit(reloadClock);
    refresh = setInterval(reloadClock, CLOCK_REFRESH_MS);
    refresh.unref();
    const chain = replicaChain(clock);
    const { buildApp } = await loadingApp;
    const writerUrl = writerUrlFrom(store.sql.standalone);
    const app = await buildApp({
      store,
      clock,
      chain,
      index: replicaIndexReads(index, { chain, store }),
      onboarder: replicaOnboarder(store, index),
      adminTokenHash: kept,
      snapshots: undefined,
      stateDir: where,
      persistent: true,
      role: 'replica',
      database: 'postgres',
      rateLimit: options.rateLimit,
      rateLimitCounts: 'database',
      trustProxy: options.trustProxy,
      logger: loggerOptions(
        options.logLevel,
        process.stderr,
        [...(options.adminToken ? [options.adminToken] : []), ...databaseUrlSecrets(url)],
        kept,
        options.logFormat,
      ),
      requestSummaries: options.logFormat === 'human',
      connections: { maxConnections, requestTimeoutMs: options.requestTimeoutMs },
      graphiql: graphiqlServed(options.graphiql ?? 'loopback', options.host),
      databaseHealth: probeDatabase(store.sql.standalone),
      forwardWrites: { writerUrl },
    });
    logger = app.log;
    const openedIndex = index;
    const timer = refresh;
    app.addHook('onClose', async () => {
      await app.handlersDrained(SHUTDOWN_HANDLER_WAIT_MS);
      clearInterval(timer);
      await openedIndex.close();
      await store.close();
    });
    await app.listen({
      host: options.host,
      port: options.port,
      listenTextResolver: () => LISTENING_LOG_TEXT,
    });
    const address = app.server.address();
    const port = typeof address === 'object' && address ? address.port : options.port;
    const writer = await readWriter(store.sql.standalone).catch(() => undefined);
    return {
      url: `http://${formatHostPort(options.host, port)}`,
      rpcUrl: '',
      adminToken: undefined,
      adminTokenGenerated: false,
      stateDir: where,
      persistent: true,
      database: where,
      writer: writer?.url ? redactedUrl(writer.url).replace(/\/$/, '') : null,
      connectionCapNote:
        maxConnections < options.maxConnections
          ? `at most ${maxConnections} connections at once (open-file limit ${fileLimit})`
          : undefined,
      // A replica holds no lock to lose.
      lost: new Promise<Error>(() => undefined),
      app,
      close: () => app.close(),
    };
  } catch (error) {
    clearInterval(refresh);
    await index?.close();
    await store.close();
    throw error;
  }
}
