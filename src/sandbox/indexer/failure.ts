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
  constructor(reason: string) {
    super(
      `the data API's index is unavailable: ${reason}; it is being rebuilt from the chain, retry shortly`,
    );
    this.name = 'IndexUnavailableError';
  }
}
