import {
  type Abi,
  BaseError,
  ContractFunctionRevertedError,
  ContractFunctionZeroDataError,
  decodeErrorResult,
  type Hash,
  type Hex,
  HttpRequestError,
  TimeoutError,
} from 'viem';
import { HttpError } from '../errors.ts';
import * as artifacts from './contracts/artifacts.ts';
import { type RpcClient, RpcError, RpcUnreachableError } from './rpc.ts';

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
    // A contract with no code (a reset node) is what is wrong, not the transaction.
    if (isMissingContract(error)) return new ContractsMissingError();
    if (error instanceof RpcError && STALE_NONCE.test(error.message)) {
      return new StaleNonceError(label, error.message);
    }
    return new TransactionFailedError(label, revertReason(error), txHash);
  }
}

/** What a node answers to a transaction whose nonce someone else's transaction has taken. */
const STALE_NONCE = /nonce too low|replacement transaction underpriced/i;

/**
 * The node refused a transaction because its nonce is already used: someone else sent from
 * the same key (the sandbox's own accounts have public keys). The wallet reads its nonce
 * from the chain again and sends once more.
 */
export class StaleNonceError extends TransactionFailedError {}

/** A contract the service relies on has no code on the chain (a reset node, a wrong deployment). */
export class ContractsMissingError extends HttpError {
  constructor() {
    super(
      503,
      "the protocol's contracts are missing from the sandbox chain; the operator must restart serve (or fix --rpc-url and --deployment)",
    );
  }
}

/** A call reached an address with no code: viem reports the empty answer it got. */
export function isMissingContract(error: unknown): boolean {
  return (
    error instanceof BaseError &&
    Boolean(error.walk((cause) => cause instanceof ContractFunctionZeroDataError))
  );
}

/** The chain's RPC endpoint does not answer. */
export class ChainUnavailableError extends HttpError {
  constructor() {
    super(503, 'the sandbox chain is not reachable; try again shortly');
  }
}

export function isUnreachable(error: unknown): boolean {
  if (error instanceof RpcUnreachableError) return true;
  return (
    error instanceof BaseError &&
    Boolean(
      error.walk((cause) => cause instanceof HttpRequestError || cause instanceof TimeoutError),
    )
  );
}

/**
 * The custom error's name and arguments when a sandbox contract's ABI decodes it (from a
 * simulated call or a gas estimate), else viem's short message.
 */
export function revertReason(error: unknown): string {
  if (!(error instanceof BaseError)) return error instanceof Error ? error.message : String(error);
  const reverted = error.walk((cause) => cause instanceof ContractFunctionRevertedError);
  if (reverted instanceof ContractFunctionRevertedError && reverted.data) {
    return describeError(reverted.data.errorName, reverted.data.args);
  }
  const data = revertData(error);
  if (data) {
    const decoded = decodeContractError(data);
    if (decoded) return decoded;
  }
  return error.shortMessage;
}

function describeError(name: string, args: readonly unknown[] | undefined): string {
  return `${name}(${(args ?? []).map((arg) => String(arg)).join(', ')})`;
}

/** The revert data anywhere in an error's chain of causes. */
function revertData(error: BaseError): Hex | undefined {
  let found: Hex | undefined;
  error.walk((cause) => {
    const data = (cause as { data?: unknown }).data;
    const hex = typeof data === 'string' ? data : (data as { data?: unknown } | undefined)?.data;
    if (typeof hex === 'string' && /^0x[0-9a-f]{8,}$/i.test(hex)) found ??= hex as Hex;
    return false;
  });
  return found;
}

function decodeContractError(data: Hex): string | undefined {
  try {
    const decoded = decodeErrorResult({ abi: CONTRACT_ERRORS, data });
    return describeError(decoded.errorName, decoded.args);
  } catch {
    return undefined;
  }
}

const CONTRACT_ERRORS: Abi = Object.values(artifacts).flatMap((artifact) =>
  (artifact.abi as Abi).filter((item) => item.type === 'error'),
);

/**
 * Why a mined transaction reverted, from anvil's call trace: the custom error's name and
 * arguments when a sandbox contract's ABI decodes it, else the node's own words.
 */
export async function tracedRevertReason(rpc: RpcClient, hash: Hash): Promise<string> {
  const trace = await rpc.call<{ output?: Hex; error?: string; revertReason?: string }>(
    'debug_traceTransaction',
    [hash, { tracer: 'callTracer' }],
  );
  const decoded =
    trace.output && trace.output !== '0x' ? decodeContractError(trace.output) : undefined;
  return decoded ?? trace.revertReason ?? trace.error ?? 'the transaction reverted';
}
