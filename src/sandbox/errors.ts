import { lstatSync } from 'node:fs';
import { DATA_ERROR_CODES, type DataError, type DataErrorCode } from '../api/schemas/index.ts';

/**
 * An error whose message is safe to show the client. The error handler sends
 * `{"error": message}` with `statusCode`; anything else becomes a generic 500.
 */
export class HttpError extends Error {
  readonly statusCode: number;

  constructor(statusCode: number, message: string) {
    super(message);
    this.name = 'HttpError';
    this.statusCode = statusCode;
  }
}

/** An error the data API answers as `{error: {code, message, details}}`. */
export class DataApiError extends Error {
  readonly code: DataErrorCode;
  readonly details: Record<string, unknown>;
  /** Writable: Fastify sets it on validation errors. */
  statusCode: number;

  constructor(code: DataErrorCode, message: string, details: Record<string, unknown> = {}) {
    super(message);
    this.name = 'DataApiError';
    this.code = code;
    this.details = details;
    this.statusCode = DATA_ERROR_CODES[code];
  }

  body(): DataError {
    return { error: { code: this.code, message: this.message, details: this.details } };
  }
}

/** The sandbox cannot start with what it was given; the message says what to change. */
export class StartupError extends Error {}

/**
 * A failed file-system call on the state directory, as the rest of a refusal: the file, why,
 * and what to do. A file that belongs to another user (a state made with sudo, say) is
 * named as such, with its owner.
 */
export function fileErrorMessage(error: NodeJS.ErrnoException, stateDir: string): string {
  const file = error.path ?? stateDir;
  const failed = `${error.syscall ?? 'access'}: ${error.code}`;
  switch (error.code) {
    case 'EACCES':
    case 'EPERM': {
      const owner = ownerOf(file);
      const me = process.getuid?.();
      if (owner !== undefined && me !== undefined && owner !== me) {
        return (
          `${file} belongs to another user (uid ${owner}; you are uid ${me}), so agentctl cannot use it (${failed}); ` +
          `give the state directory to yourself (sudo chown -R ${me} ${stateDir}) or choose another --state directory`
        );
      }
      return (
        `${file} is not open to you (${failed}); ` +
        `let yourself read and write the state directory (chmod -R u+rwX ${stateDir}) or choose another --state directory`
      );
    }
    case 'EROFS':
      return `${file} is on a read-only file system (${failed}); choose a --state directory on a writable one`;
    case 'ENOSPC':
    case 'EDQUOT':
      return `no space is left for ${file} (${failed}); free some space or choose another --state directory`;
    default: {
      // Node's message is "CODE: what happened, syscall 'path'".
      const what = /^E[A-Z]+: ([^,]+)/.exec(error.message)?.[1];
      return `${file} cannot be used (${failed}${what ? `, ${what}` : ''}); check it, or choose another --state directory`;
    }
  }
}

/** The uid owning `path`, or undefined when even that cannot be seen. */
function ownerOf(path: string): number | undefined {
  try {
    return lstatSync(path).uid;
  } catch {
    return undefined;
  }
}

/** A Node file-system error (it carries an errno code and the call that failed). */
export function isFileError(error: unknown): error is NodeJS.ErrnoException {
  const { code, syscall } = (error ?? {}) as NodeJS.ErrnoException;
  return typeof code === 'string' && /^E[A-Z]+$/.test(code) && typeof syscall === 'string';
}
