/**
 * The sandbox's start-up options. Kept free of imports so `agentctl serve --help`
 * can read them without loading Fastify or SQLite.
 */
export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];
/** Pino's numeric levels by name, as the JSON log writes them (serve's log and `serve logs`). */
export const LOG_LEVEL_NAMES: Readonly<Record<number, string>> = {
  10: 'trace',
  20: 'debug',
  30: 'info',
  40: 'warn',
  50: 'error',
  60: 'fatal',
};
export const LOG_FORMATS = ['human', 'json'] as const;
export type LogFormat = (typeof LOG_FORMATS)[number];
export const DEFAULT_MAX_CONNECTIONS = 1024;
/** The log of a serve started with --detach, in its state directory. */
export const SERVE_LOG_FILE = 'serve.log';
/** What a detached serve's log says in place of its generated admin token. */
export const TOKEN_NOT_LOGGED = 'admin token: shown once at start, not logged';
/**
 * Set by `serve --detach` for the serve it starts: the file descriptor (a pipe to the parent)
 * that takes the admin token line, which must not go to the log file.
 */
export const TOKEN_FD_ENV = 'AGENTCTL_SERVE_TOKEN_FD';
/**
 * Set by `serve --from FILE --detach` without --state for the serve it starts on the default
 * state directory: the sandbox there is temporary (emptied at start and when it stops).
 */
export const TEMPORARY_STATE_ENV = 'AGENTCTL_SERVE_TEMPORARY_STATE';
export const DEFAULT_REQUEST_TIMEOUT_SECONDS = 30;
/** When GET /graphql serves GraphiQL to a browser: on a loopback address only, always, never. */
export const GRAPHIQL_MODES = ['loopback', 'on', 'off'] as const;
export type GraphiqlMode = (typeof GRAPHIQL_MODES)[number];

export interface SandboxOptions {
  host: string;
  port: number;
  /** Persistent state directory; a temporary one when undefined (and no `database`). */
  state: string | undefined;
  /**
   * A PostgreSQL database (postgres:// or postgresql:// URL) that keeps all of the sandbox's
   * state instead of a state dir (a team sandbox's writer; see docs/team-sandbox.md). Not with
   * `state`, `fromFile` or `rpcUrl`.
   */
  database?: string;
  /**
   * With `database`: a read replica of the team sandbox kept there (serve --replica): no chain,
   * no state, no lock, no migration; reads from the database, writes forwarded to the writer.
   */
  replica?: boolean;
  /**
   * The URL this writer records in the database for replicas to forward writes to (default:
   * http://HOST:PORT, HOST being os.hostname() when listening on every interface).
   */
  advertiseUrl?: string;
  /** Admin API token; generated when undefined. */
  adminToken: string | undefined;
  rateLimit: boolean;
  /**
   * Where rate limit windows are counted: 'memory' (the default) or 'database', shared by the
   * servers on one database (plugins/rate-limit.ts RateLimitCounts).
   */
  rateLimitCounts?: 'memory' | 'database';
  trustProxy: boolean;
  logLevel: LogLevel;
  /** human: one short line per request, for a terminal; json: pino's JSON lines. */
  logFormat: LogFormat;
  /** An existing node to use instead of starting anvil. */
  rpcUrl?: string;
  /** Contract addresses on `rpcUrl` when it is not a dev chain. */
  deploymentFile?: string;
  /** Most client connections at once (lowered to fit the open-file limit). */
  maxConnections: number;
  /** Time to receive a whole request, in milliseconds. */
  requestTimeoutMs: number;
  /** When GraphiQL is served (default: when listening on a loopback address). */
  graphiql?: GraphiqlMode;
  /**
   * An exported sandbox (`agentctl sandbox export`) to start from: in a new temporary state
   * directory without `state`, else in `state`, which must be empty (or not exist).
   */
  fromFile?: string;
  /**
   * `state` holds a temporary sandbox (`serve --from FILE --detach` without --state, on the
   * default dir where `serve stop` looks). At start it may hold only what an earlier temporary
   * sandbox left (it was killed), which is removed; when it stops, all but its log is removed.
   */
  temporaryState?: boolean;
}
