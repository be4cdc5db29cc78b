import { type Address, formatUnits, type Hash, parseEventLogs, parseUnits } from 'viem';
import { VAULT_IDS, type VaultId } from '../../api/schemas/index.ts';
import { HttpError } from '../errors.ts';
import type { StoreTx } from '../store/index.ts';
import { ConfigurableVault, MockUSDC, SandboxVault } from './contracts/artifacts.ts';
import { VAULT_CONFIG } from './deployment.ts';
import type { SandboxChain } from './index.ts';

export const USDC_DECIMALS = 6;

/** `amount` is exact decimal text (the schemas' UsdcAmount), so nothing is rounded. */
export function toUsdcRaw(amount: string): bigint {
  return parseUnits(amount, USDC_DECIMALS);
}

export function formatUsdc(raw: bigint): string {
  return formatUnits(raw, USDC_DECIMALS);
}

/** Every vault with its live totals, read onchain. APY is a percentage (4 means 4 %). */
export async function listVaults(chain: SandboxChain) {
  const { publicClient, deployment } = chain;
  return Promise.all(
    VAULT_IDS.map(async (id) => {
      const address = deployment.vaults[id];
      const [totalAssets, apyBps] = await Promise.all([
        publicClient.readContract({ address, abi: SandboxVault.abi, functionName: 'totalAssets' }),
        publicClient.readContract({ address, abi: SandboxVault.abi, functionName: 'apyBps' }),
      ]);
      return {
        vault_id: id,
        address,
        name: VAULT_CONFIG[id].name,
        asset: deployment.usdc,
        total_assets: formatUsdc(totalAssets),
        apy: Number(apyBps) / 100,
        status: 'active',
      };
    }),
  );
}

/** The wallet's shares in every vault it holds, with their current value in USDC. */
export async function positionsOf(chain: SandboxChain, owner: Address) {
  const { publicClient, deployment } = chain;
  const all = await Promise.all(
    VAULT_IDS.map(async (id) => {
      const address = deployment.vaults[id];
      const shares = await publicClient.readContract({
        address,
        abi: SandboxVault.abi,
        functionName: 'balanceOf',
        args: [owner],
      });
      const value =
        shares === 0n
          ? 0n
          : await publicClient.readContract({
              address,
              abi: SandboxVault.abi,
              functionName: 'convertToAssets',
              args: [shares],
            });
      return { id, address, shares, value };
    }),
  );
  return positionsAnswer(all.filter((position) => position.shares > 0n));
}

/** One vault's shares held, and their value in raw USDC. */
export interface HeldPosition {
  id: VaultId;
  address: Address;
  shares: bigint;
  value: bigint;
}

/** Positions as Part A answers them, and their total value (raw USDC). */
export function positionsAnswer(held: HeldPosition[]) {
  return {
    positions: held.map((position) => ({
      vault_id: position.id,
      vault_address: position.address,
      vault_name: VAULT_CONFIG[position.id].name,
      shares: formatUsdc(position.shares),
      value_usdc: formatUsdc(position.value),
    })),
    totalValueRaw: held.reduce((sum, position) => sum + position.value, 0n),
  };
}

/** Every USDC ever deposited into the vaults (yield not counted), read onchain. */
export async function totalDeposited(chain: SandboxChain): Promise<bigint> {
  const totals = await Promise.all(
    VAULT_IDS.map((id) =>
      chain.publicClient.readContract({
        address: chain.deployment.vaults[id],
        abi: SandboxVault.abi,
        functionName: 'totalDeposited',
      }),
    ),
  );
  return totals.reduce((sum, total) => sum + total, 0n);
}

export function usdcBalanceOf(chain: SandboxChain, owner: Address): Promise<bigint> {
  return chain.publicClient.readContract({
    address: chain.deployment.usdc,
    abi: MockUSDC.abi,
    functionName: 'balanceOf',
    args: [owner],
  });
}

/** Gas for a deposit, which cannot be estimated before its approve is mined; it uses about 120k. */
const DEPOSIT_GAS = 400_000n;

/**
 * Approves then deposits from the agent's server-side wallet, both signed at once and mined in
 * one block. An amount above the balance is refused before anything is sent. `record` commits
 * with the block. `shares` is the vault's balanceOf for the wallet once the deposit is durable.
 *
 * Into the ERC-7540 vault, the deposit is a request (`requestDeposit`, the agent's wallet its
 * controller): it answers with the request's id and when the operator may fulfil it, and the
 * fulfiller (operator/fulfilment.ts) fulfils and claims it then.
 */
export async function depositToVault(
  chain: SandboxChain,
  walletIndex: number,
  vaultId: VaultId,
  amountRaw: bigint,
  record: (tx: StoreTx, deposit: Deposit) => Promise<void>,
): Promise<Deposit> {
  const vault = chain.deployment.vaults[vaultId];
  const async = VAULT_CONFIG[vaultId].async;
  return chain.wallet(walletIndex).exclusive(async (session) => {
    const balance = await usdcBalanceOf(chain, session.address);
    if (balance < amountRaw) {
      throw new HttpError(
        400,
        `amount_usdc ${formatUsdc(amountRaw)} is more than the wallet's USDC balance of ${formatUsdc(balance)}`,
      );
    }
    const deposit = async
      ? {
          label: 'deposit request',
          address: vault,
          abi: ConfigurableVault.abi,
          functionName: 'requestDeposit',
          args: [amountRaw, session.address, session.address],
          gas: DEPOSIT_GAS,
        }
      : {
          label: 'deposit',
          address: vault,
          abi: SandboxVault.abi,
          functionName: 'deposit',
          args: [amountRaw, session.address],
          gas: DEPOSIT_GAS,
        };
    const { recorded } = await session.send<Deposit, Pick<Deposit, 'shares' | 'request'>>(
      [
        {
          label: 'approve',
          address: chain.deployment.usdc,
          abi: MockUSDC.abi,
          functionName: 'approve',
          args: [vault, amountRaw],
          // Estimated, not fixed: the estimate refuses an approve that would revert (a frozen
          // account) before anything is sent, so neither transaction is mined.
        },
        deposit,
      ],
      async (tx, receipts, settled) => {
        const outcome: Deposit = {
          agentAddress: session.address,
          approveTx: receipts[0]?.transactionHash as Hash,
          depositTx: receipts[1]?.transactionHash as Hash,
          ...settled,
          vault,
          vaultName: VAULT_CONFIG[vaultId].name,
        };
        await record(tx, outcome);
        return outcome;
      },
      {
        // Read on the block the deposit is in, before it is committed: the answer commits
        // with the deposit (Idempotency-Key).
        settle: async (receipts) => {
          const [shares, request] = await Promise.all([
            chain.publicClient.readContract({
              address: vault,
              abi: SandboxVault.abi,
              functionName: 'balanceOf',
              args: [session.address],
            }),
            async ? requestOf(chain, vault, receipts[1]?.logs ?? []) : undefined,
          ]);
          return { shares, request };
        },
      },
    );
    return recorded;
  });
}

/** A deposit made, as its answer tells it. */
export interface Deposit {
  agentAddress: Address;
  approveTx: Hash;
  depositTx: Hash;
  /** The wallet's shares in the vault once the deposit is mined. */
  shares: bigint;
  /** An ERC-7540 deposit request waiting for its fulfilment. */
  request: { id: bigint; fulfillableAt: number } | undefined;
  vault: Address;
  vaultName: string;
}

/** The deposit request a receipt's logs hold, and when the operator may fulfil it. */
async function requestOf(
  chain: SandboxChain,
  vault: Address,
  logs: Parameters<typeof parseEventLogs>[0]['logs'],
) {
  const [event] = parseEventLogs({
    abi: ConfigurableVault.abi,
    eventName: 'DepositRequest',
    logs,
  });
  if (!event) throw new Error('the deposit request was mined without its DepositRequest event');
  const fulfillableAt = await chain.publicClient.readContract({
    address: vault,
    abi: ConfigurableVault.abi,
    functionName: 'fulfillableAt',
    args: [event.args.requestId],
  });
  return { id: event.args.requestId, fulfillableAt: Number(fulfillableAt) };
}

/** Sets the ERC-7540 vault's fulfilment delay (the treasury is its admin); a synchronous vault has none. */
export async function setFulfillmentDelay(
  chain: SandboxChain,
  vaultId: VaultId,
  seconds: number,
  record: (tx: StoreTx, set: { vault: Address; txHash: Hash }) => Promise<void> = async () => {},
) {
  if (!VAULT_CONFIG[vaultId].async) {
    throw new HttpError(
      400,
      `vault_id: ${vaultId} is a synchronous ERC-4626 vault and has no fulfilment delay; only ${VAULT_IDS.filter((id) => VAULT_CONFIG[id].async).join(', ')} has one`,
    );
  }
  const vault = chain.deployment.vaults[vaultId];
  const { recorded } = await chain.treasury.exclusive((session) =>
    session.send(
      [
        {
          label: 'setting the fulfilment delay',
          address: vault,
          abi: ConfigurableVault.abi,
          functionName: 'setFulfillmentDelay',
          args: [BigInt(seconds)],
        },
      ],
      async (tx, [receipt]) => {
        const set = { vault, txHash: receipt?.transactionHash as Hash };
        await record(tx, set);
        return set;
      },
    ),
  );
  return recorded;
}
