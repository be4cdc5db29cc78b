/**
 * SQLite's primary result codes that mean index.db can no longer be trusted or written:
 * a damaged page (CORRUPT, NOTADB), or a file the disk no longer takes (IOERR, FULL,
 * CANTOPEN). index.db holds nothing that is not on the chain, so each is answered by
 * rebuilding it, never by answering from it.
 */
const FAILURE_CODES = new Set([
  10, // SQLITE_IOERR
  11, // SQLITE_CORRUPT
  13, // SQLITE_FULL
  14, // SQLITE_CANTOPEN
  26, // SQLITE_NOTADB
]);

/** Whether `error` is SQLite saying that the index's file is damaged or cannot be written. */
export function isIndexFileFailure(error: unknown): boolean {
  const errcode = (error as { errcode?: unknown } | null)?.errcode;
  return typeof errcode === 'number' && FAILURE_CODES.has(errcode & 0xff);
}

/**
 * The index cannot answer: its file failed, and it is being rebuilt from the chain. /v1 and
 * GraphQL answer it as INDEX_UNAVAILABLE (503), never with what the damaged file says.
 */
export class IndexUnavailableError extends Error {
  /** `outlook`: what happens meanwhile (a rebuild, unless said otherwise). */
  constructor(reason: string, outlook = 'it is being rebuilt from the chain') {
    super(`the data API's index is unavailable: ${reason}; ${outlook}, retry shortly`);
    this.name = 'IndexUnavailableError';
  }
}

/**
 * What went wrong with a connection to PostgreSQL (isConnectionFailure's errors), in words
 * that name no host, port, user or database: it is told to any client (a 503's body, /health).
 * The whole error goes to the server's log.
 */
export function connectionFailureReason(error: unknown): string {
  const { code, message } = (error ?? {}) as { code?: unknown; message?: unknown };
  const byCode: Record<string, string> = {
    ECONNREFUSED: 'connection refused',
    ECONNRESET: 'connection reset',
    EPIPE: 'connection lost',
    ETIMEDOUT: 'timed out connecting',
    EHOSTUNREACH: 'host unreachable',
    ENETUNREACH: 'network unreachable',
    ENOTFOUND: 'host not found',
    EAI_AGAIN: 'host name lookup failed',
    '57P01': 'the server ended the session',
    '57P02': 'the server is shutting down',
    '57P03': 'the server does not accept connections now',
    '28P01': 'authentication failed',
    '28000': 'authentication failed',
    '3D000': 'the database does not exist',
    '53300': 'too many connections',
  };
  if (typeof code === 'string') {
    const known = byCode[code];
    if (known) return known;
    if (code.startsWith('08')) return 'connection failed';
  }
  if (typeof message === 'string') {
    if (/Connection terminated/i.test(message)) return 'connection lost';
    if (message === 'Query read timeout') return 'no answer within the timeout';
    if (/timeout/i.test(message)) return 'no connection within the timeout';
  }
  return isConnectionFailure(error) ? 'connection failed' : 'a query failed (see the server log)';
}

/**
 * Whether `error` is a PostgreSQL connection that failed or could not be made (a socket error,
 * a server shutting down, a FATAL), rather than an answer to a statement: the storage cannot be
 * reached for now, and the index it holds is not damaged by that.
 */
export function isConnectionFailure(error: unknown): boolean {
  const failure = error as { code?: unknown; severity?: unknown; message?: unknown } | null;
  if (failure === null || typeof failure !== 'object') return false;
  const { code, severity, message } = failure;
  if (typeof code === 'string') {
    // SQLSTATE class 08 (connection exception); 57P01-57P03 (shut down, cannot connect now).
    if (/^08|^57P0[1-3]$/.test(code)) return true;
    if (
      /^E(CONNREFUSED|CONNRESET|PIPE|TIMEDOUT|HOSTUNREACH|NETUNREACH|NOTFOUND|AI_AGAIN)$/.test(code)
    )
      return true;
  }
  if (severity === 'FATAL' || severity === 'PANIC') return true;
  return (
    typeof message === 'string' &&
    /Connection terminated|not queryable|connection error|timeout exceeded when trying to connect/i.test(
      message,
    )
  );
}
