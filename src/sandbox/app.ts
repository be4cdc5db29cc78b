import Fastify, { type FastifyServerOptions } from 'fastify';
import { CLOSE_SANDBOX_RESTORED, type GraphqlLimits } from '../api/schemas/index.ts';
import { formatHostPort } from './address.ts';
import type { SandboxChain } from './chain/index.ts';
import type { SandboxClock } from './clock.ts';
import type { Live } from './graphql/live.ts';
import type { IndexReads } from './indexer/index-reads.ts';
import type { Onboarder } from './operator/onboarding.ts';
import { createAuthGuards } from './plugins/auth.ts';
import {
  type ConnectionLimits,
  connectionServerOptions,
  registerConnectionHandling,
} from './plugins/connections.ts';
import {
  answerFrameworkError,
  clientErrorOf,
  handleClientError,
  registerErrorHandling,
} from './plugins/errors.ts';
import { createIdempotency } from './plugins/idempotency.ts';
import { registerJsonBody } from './plugins/json-body.ts';
import { registerRequestSummaries } from './plugins/logging.ts';
import { registerOpenApi } from './plugins/openapi.ts';
import { type DataTiers, type RateLimitCounts, registerRateLimits } from './plugins/rate-limit.ts';
import { registerWriteGate } from './plugins/write-gate.ts';
import { serializerCompiler, validatorCompiler, type ZodTypeProvider } from './plugins/zod.ts';
import { registerAgentRoutes } from './routes/agents.ts';
import { registerAuthRoutes } from './routes/auth.ts';
import { registerDataRoutes } from './routes/data.ts';
import { registerGovernanceRoutes } from './routes/governance.ts';
import { registerGraphqlRoutes } from './routes/graphql.ts';
import { registerHealthRoutes } from './routes/health.ts';
import { type AdminDeps, registerSandboxAdminRoutes } from './routes/sandbox-admin.ts';
import { registerSnapshotRoutes } from './routes/snapshots.ts';
import { registerStrategyRoutes } from './routes/strategies.ts';
import type { App } from './routes/types.ts';
import { registerVaultRoutes } from './routes/vaults.ts';
import { registerWalletRoutes } from './routes/wallet.ts';
import type { Snapshots } from './snapshots/index.ts';
import type { Store } from './store/index.ts';
import type { DatabaseHealth } from './team/database-health.ts';
import type { WriteForwardingOptions } from './team/forward-writes.ts';

/**
 * host:port the service listens on. The registration message names it, never the client's
 * Host header: a phishing proxy must not get messages that name its own domain.
 * Before listen (tests with inject) it is "localhost".
 */
function listeningDomain(app: App): string {
  const address = app.server.address();
  if (!address || typeof address === 'string') return 'localhost';
  return formatHostPort(address.address, address.port);
}

/** Request bodies above this are refused with 413. */
export const BODY_LIMIT_BYTES = 64 * 1024;

export interface AppOptions extends AdminDeps {
  /** Snapshots and restores (runtime.ts); undefined on a chain the sandbox does not own. */
  snapshots: Snapshots | undefined;
  store: Store;
  clock: SandboxClock;
  chain: SandboxChain;
  index: IndexReads;
  onboarder: Onboarder;
  trustProxy: boolean;
  logger: FastifyServerOptions['logger'];
  /** One short line per request (the human log format) instead of Fastify's two JSON lines. */
  requestSummaries?: boolean;
  connections: ConnectionLimits;
  /** The data API's tiers; tests lower them to reach the day window. */
  dataTiers?: DataTiers;
  /**
   * Where rate limit windows are counted: 'memory' (the default: one process) or 'database'
   * (store.rateCounts), which servers sharing a PostgreSQL database need, so that a client's
   * tier is not multiplied by their number. Tests may count in the database on SQLite too.
   */
  rateLimitCounts?: RateLimitCounts;
  /** Serve GraphiQL at GET /graphql to a browser (serve --graphiql). */
  graphiql?: boolean;
  /** GraphQL's limits; tests lower some of them. */
  graphqlLimits?: Partial<GraphqlLimits>;
  /** A sandbox kept in PostgreSQL: its database's probe, for /health (team/database-health.ts). */
  databaseHealth?: () => Promise<DatabaseHealth>;
  /**
   * A read replica's writes, forwarded to the writer (team/forward-writes.ts): registered as the
   * app's first hook, so that a forwarded request meets none of the replica's own.
   */
  forwardWrites?: Omit<WriteForwardingOptions, 'bodyLimit'>;
}

/**
 * Builds the sandbox service as a Fastify instance, without listening and without
 * owning its resources (store, clock, chain): server.ts does both. Tests call this directly.
 */
export async function buildApp(options: AppOptions): Promise<App> {
  const app = Fastify({
    logger: options.logger,
    // Trust one hop only: the client address is the one the proxy appended to
    // X-Forwarded-For, not whatever the client wrote there before it.
    trustProxy: options.trustProxy ? (_address, hop) => hop === 0 : false,
    bodyLimit: BODY_LIMIT_BYTES,
    clientErrorHandler: handleClientError,
    frameworkErrors: answerFrameworkError,
    ...connectionServerOptions(options.connections),
  }).withTypeProvider<ZodTypeProvider>();

  if (options.forwardWrites) {
    // Loaded only on a replica: it brings undici and PostgreSQL's driver.
    const { registerWriteForwarding } = await import('./team/forward-writes.ts');
    registerWriteForwarding(app, { ...options.forwardWrites, bodyLimit: BODY_LIMIT_BYTES });
  }
  app.setValidatorCompiler(validatorCompiler);
  app.setSerializerCompiler(serializerCompiler);
  app.decorateRequest('agent', null);
  registerJsonBody(app);
  // Every answer carries the sandbox's clock, which `sandbox advance` moves: the command line
  // computes its relative hints ("in 24 h") from it rather than from the wall clock.
  // A forwarded write's answer keeps the writer's (the clock that made it).
  app.addHook('onSend', (_request, reply, payload, done) => {
    if (!reply.hasHeader('x-sandbox-time')) {
      reply.header('x-sandbox-time', String(options.clock.nowSeconds()));
    }
    done(null, payload);
  });
  registerErrorHandling(app, options.stateDir);
  if (options.requestSummaries) registerRequestSummaries(app);
  registerConnectionHandling(app, options.connections);
  const writes = registerWriteGate(app);
  await registerOpenApi(app);
  const keys = createIdempotency({
    store: options.store,
    errorAnswer: (error) => clientErrorOf(error, options.stateDir),
    log: app.log,
  });
  app.addHook('onClose', async () => keys.close());

  const deps = {
    serviceDomain: () => listeningDomain(app),
    store: options.store,
    clock: options.clock,
    limits: await registerRateLimits(app, {
      enabled: options.rateLimit,
      ...(options.dataTiers && { dataTiers: options.dataTiers }),
      ...(options.rateLimitCounts === 'database' && {
        database: { counts: options.store.rateCounts },
      }),
    }),
    auth: createAuthGuards(options.store, options.onboarder),
    chain: options.chain,
    index: options.index,
    onboarder: options.onboarder,
    keys,
    ...(options.databaseHealth && { databaseHealth: options.databaseHealth }),
  };
  registerHealthRoutes(app, deps);
  registerAuthRoutes(app, deps);
  registerAgentRoutes(app, deps);
  registerVaultRoutes(app, deps);
  registerStrategyRoutes(app, deps);
  registerGovernanceRoutes(app, deps);
  registerWalletRoutes(app, deps);
  let live: Live | undefined;
  registerSandboxAdminRoutes(app, deps, options, {
    graphql: () =>
      live?.stats() ?? {
        sockets: 0,
        subscriptions: 0,
        distinct_subscriptions: 0,
        events_sent: 0,
        dropped: 0,
      },
  });
  const data = registerDataRoutes(app, deps);
  live = await registerGraphqlRoutes(app, deps, data, {
    graphiql: options.graphiql ?? false,
    ...(options.graphqlLimits && { limits: options.graphqlLimits }),
  });
  const { snapshots } = options;
  if (snapshots) {
    snapshots.holdWritesWith(() => writes.hold());
    const unsubscribe = snapshots.onRestored(() => {
      // The restored state's keys are back, and those made since are gone.
      void keys.recount();
      live?.closeAll(CLOSE_SANDBOX_RESTORED, 'Sandbox restored');
    });
    app.addHook('onClose', async () => {
      unsubscribe();
    });
  }
  registerSnapshotRoutes(app, snapshots, { ...options, keys });
  return app;
}
