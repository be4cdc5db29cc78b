import type {
  FastifyBaseLogger,
  FastifyInstance,
  RawReplyDefaultExpression,
  RawRequestDefaultExpression,
  RawServerDefault,
} from 'fastify';
import type { SandboxChain } from '../chain/index.ts';
import type { SandboxClock } from '../clock.ts';
import type { IndexReads } from '../indexer/index-reads.ts';
import type { Onboarder } from '../operator/onboarding.ts';
import type { AuthGuards } from '../plugins/auth.ts';
import type { Idempotency } from '../plugins/idempotency.ts';
import type { RateLimitHooks } from '../plugins/rate-limit.ts';
import type { ZodTypeProvider } from '../plugins/zod.ts';
import type { Store } from '../store/index.ts';
import type { DatabaseHealth } from '../team/database-health.ts';

/** The Fastify instance routes are declared on: schemas are the shared zod schemas. */
export type App = FastifyInstance<
  RawServerDefault,
  RawRequestDefaultExpression,
  RawReplyDefaultExpression,
  FastifyBaseLogger,
  ZodTypeProvider
>;

/** What route modules may use. Handlers stay thin and call into these. */
export interface RouteDeps {
  /** host:port named in registration messages. */
  serviceDomain: () => string;
  store: Store;
  clock: SandboxClock;
  limits: RateLimitHooks;
  auth: AuthGuards;
  chain: SandboxChain;
  /** The data API's index, read through its queries (never index.db). */
  index: IndexReads;
  /** Funds new agents' wallets; requests about an agent wait for it. */
  onboarder: Onboarder;
  /** Idempotency-Key: every write's handler is wrapped in `keys.keyed`. */
  keys: Idempotency;
  /** Whether a sandbox kept in PostgreSQL reaches its database (/health); absent on SQLite. */
  databaseHealth?: () => Promise<DatabaseHealth>;
}
