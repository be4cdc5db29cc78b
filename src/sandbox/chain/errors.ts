import { BaseError, ContractFunctionRevertedError, HttpRequestError, TimeoutError } from 'viem';
import { HttpError } from '../errors.ts';

/**
 * A transaction the sandbox tried to send did not succeed onchain: it was refused before
 * broadcast (for example, it would revert) or its receipt says it reverted. Nothing that
 * depended on it was recorded. Answered with 502: the service's own upstream (the chain)
 * refused the work.
 */
export class TransactionFailedError extends HttpError {
  readonly txHash: string | undefined;

  constructor(label: string, reason: string, txHash?: string) {
    super(502, `${label} failed onchain: ${reason}${txHash ? ` (tx ${txHash})` : ''}`);
    this.txHash = txHash;
  }

  static from(label: string, error: unknown, txHash?: string): HttpError {
    if (error instanceof HttpError) return error;
    if (isUnreachable(error)) return new ChainUnavailableError();
    return new TransactionFailedError(label, revertReason(error), txHash);
  }
}

/** The chain's RPC endpoint does not answer. */
export class ChainUnavailableError extends HttpError {
  constructor() {
    super(503, 'the sandbox chain is not reachable; try again shortly');
  }
}

export function isUnreachable(error: unknown): boolean {
  return (
    error instanceof BaseError &&
    Boolean(
      error.walk((cause) => cause instanceof HttpRequestError || cause instanceof TimeoutError),
    )
  );
}

/** The custom error's name and arguments when the ABI decodes it, else viem's short message. */
export function revertReason(error: unknown): string {
  if (!(error instanceof BaseError)) return error instanceof Error ? error.message : String(error);
  const reverted = error.walk((cause) => cause instanceof ContractFunctionRevertedError);
  if (reverted instanceof ContractFunctionRevertedError && reverted.data) {
    const args = (reverted.data.args ?? []).map((arg) => String(arg)).join(', ');
    return `${reverted.data.errorName}(${args})`;
  }
  return error.shortMessage;
}
