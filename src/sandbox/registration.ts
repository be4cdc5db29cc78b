import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { type Address, getAddress, type Hex } from 'viem';
import type { z } from 'zod';
import {
  CHAIN_ID,
  NONCE_TTL_SECONDS,
  type RegisterRequest,
  type RegisterResponse,
} from '../api/schemas/index.ts';
import type { SandboxClock } from './clock.ts';
import { HttpError } from './errors.ts';
import type { Onboarder } from './operator/onboarding.ts';
import type { SignerPool } from './signatures/pool.ts';
import type { Store, StoreTx } from './store/index.ts';
import type { NonceRow } from './store/nonces.ts';

/** A registration's answer: it holds the new API key, shown this once. */
export type Registered = z.input<typeof RegisterResponse>;

const API_KEY_PREFIX = 'agk_';
const SHOWN_PREFIX_LENGTH = API_KEY_PREFIX.length + 8;

/**
 * The text an agent signs to register, in the spirit of EIP-4361 (Sign-In with Ethereum).
 * It is rebuilt from the stored nonce row at verification, so a client cannot alter it.
 */
export function registrationMessage(
  row: Pick<NonceRow, 'domain' | 'wallet' | 'nonce' | 'issued_at'>,
) {
  return [
    `${row.domain} wants you to sign in with your Ethereum account:`,
    getAddress(row.wallet),
    '',
    'Register this wallet as an agent of the agent-vault protocol. This signature costs no gas.',
    '',
    'Version: 1',
    `Chain ID: ${CHAIN_ID}`,
    `Nonce: ${row.nonce}`,
    `Issued At: ${row.issued_at}`,
    `Expiration Time: ${row.issued_at + NONCE_TTL_SECONDS}`,
  ].join('\n');
}

/** Issues a 256-bit nonce bound to `wallet` and returns the message to sign. */
export async function issueNonce(
  store: Store,
  clock: SandboxClock,
  wallet: string,
  domain: string,
) {
  const issuedAt = clock.nowSeconds();
  const row = {
    nonce: randomBytes(32).toString('hex'),
    wallet: wallet.toLowerCase(),
    domain,
    issued_at: issuedAt,
    expires_at: issuedAt + NONCE_TTL_SECONDS,
  };
  await store.nonces.issue(row);
  return {
    nonce: row.nonce,
    message: registrationMessage(row),
    expires_in_seconds: NONCE_TTL_SECONDS,
  };
}

export function hashApiKey(key: string): string {
  return createHash('sha256').update(key).digest('hex');
}

const NODE_KEY_PREFIX = 'agn_';

/** A node key for the data API's Node Operator tier (POST /sandbox/nodes); stored as its hash. */
export function newNodeKey() {
  const key = NODE_KEY_PREFIX + randomBytes(32).toString('hex');
  return { key, hash: hashApiKey(key) };
}

function newApiKey() {
  const key = API_KEY_PREFIX + randomBytes(32).toString('hex');
  return { key, hash: hashApiKey(key), prefix: key.slice(0, SHOWN_PREFIX_LENGTH) };
}

/** The 409 names the wallet in its EIP-55 form, whatever case the client wrote. */
function alreadyRegistered(wallet: string): HttpError {
  return new HttpError(409, `wallet ${getAddress(wallet)} is already registered`);
}

/** Returns the nonce row if it can register `wallet` now; otherwise throws a 401 saying why. */
function usableNonce(row: NonceRow | undefined, wallet: string, now: number): NonceRow {
  const refuse = (reason: string) => new HttpError(401, reason);
  if (!row) throw refuse('unknown nonce: request one from GET /api/v1/agent/auth/nonce');
  if (row.wallet !== wallet) throw refuse('nonce was issued for a different wallet');
  if (row.consumed_at !== null) throw refuse('nonce has already been used; request a new one');
  if (row.expires_at <= now) throw refuse('nonce has expired; request a new one');
  return row;
}

/**
 * Verifies the signed nonce and creates the agent. In one durable commit (shared with other
 * registrations arriving together): the nonce is consumed, the agent gets the next wallet
 * index, and the agent, its key and its row in the onboarding outbox are inserted. The
 * answer follows that commit; `onboarder` funds the wallet onchain right after. A nonce that
 * expires while the registration runs, or a retry, can never fund a second wallet.
 */
export async function registerAgent(
  store: Store,
  clock: SandboxClock,
  request: z.output<typeof RegisterRequest>,
  wallets: { reserve(): Promise<number>; addressAt(index: number): Address },
  onboarder: Pick<Onboarder, 'add'>,
  signerOf: SignerPool['signerOf'],
  /** Runs in the commit that registers the agent, with the answer (Idempotency-Key). */
  commitAnswer: (tx: StoreTx, answer: Registered) => Promise<void> = async () => {},
): Promise<Registered> {
  const wallet = request.wallet_address.toLowerCase();
  if (await store.agents.findByWallet(wallet)) {
    throw alreadyRegistered(wallet);
  }
  const row = usableNonce(
    await store.nonces.find(request.nonce.toLowerCase()),
    wallet,
    clock.nowSeconds(),
  );

  const signer = await signerOf(registrationMessage(row), request.signature as Hex);
  if (signer?.toLowerCase() !== wallet) {
    throw new HttpError(
      401,
      'signature does not match wallet_address: sign the full message from the nonce endpoint with EIP-191 personal_sign',
    );
  }

  const apiKey = newApiKey();
  const agentId = randomUUID();
  const reserved = await wallets.reserve();
  const answer: Registered = {
    success: true,
    agent_id: agentId,
    agent_name: request.agent_name,
    api_key: apiKey.key,
    api_key_prefix: apiKey.prefix,
    tier: 'unverified' as const,
    message: 'Agent registered. Store the API key now: it is shown only once.',
  };
  const queued = await store.commitSoon(async (tx) => {
    const now = clock.nowMs();
    // Checked again inside the commit: another request may have won the race since the reads above.
    if (!(await tx.nonces.consume(row.nonce, Math.floor(now / 1000)))) {
      usableNonce(await tx.nonces.find(row.nonce), wallet, Math.floor(now / 1000));
      throw new HttpError(401, 'nonce can no longer be used; request a new one');
    }
    if (await tx.agents.findByWallet(wallet)) {
      throw alreadyRegistered(wallet);
    }
    const walletIndex = await tx.takeWalletIndex(reserved);
    const agentAddress = wallets.addressAt(walletIndex);
    await tx.agents.insert(
      {
        agent_id: agentId,
        wallet_address: getAddress(wallet),
        wallet_key: wallet,
        agent_name: request.agent_name,
        agent_type: request.agent_type,
        description: request.description ?? null,
        operator_address: getAddress(request.operator_address),
        operator_email: request.operator_email ?? null,
        operator_name: request.operator_name ?? null,
        framework: request.framework ?? null,
        repo_url: request.repo_url ?? null,
        tier: 'unverified' as const,
        created_at: now,
        wallet_index: walletIndex,
        agent_address: agentAddress,
      },
      apiKey,
    );
    const outbox = {
      agent_id: agentId,
      agent_address: agentAddress,
      registered_wallet: getAddress(wallet),
      queued_at: now,
    };
    await tx.onboarding.enqueue(outbox);
    await commitAnswer(tx, answer);
    return outbox;
  });
  onboarder.add(queued);
  return answer;
}
