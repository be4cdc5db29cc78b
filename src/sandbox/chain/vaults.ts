import { type Address, formatUnits, type Hash, parseUnits } from 'viem';
import { VAULT_IDS, type VaultId } from '../../api/schemas/index.ts';
import { HttpError } from '../errors.ts';
import { MockUSDC, SandboxVault } from './contracts/artifacts.ts';
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
  const held = all.filter((position) => position.shares > 0n);
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
 */
export async function depositToVault(
  chain: SandboxChain,
  walletIndex: number,
  vaultId: VaultId,
  amountRaw: bigint,
  record: () => void,
) {
  const vault = chain.deployment.vaults[vaultId];
  const result = await chain.wallet(walletIndex).exclusive(async (session) => {
    const balance = await usdcBalanceOf(chain, session.address);
    if (balance < amountRaw) {
      throw new HttpError(
        400,
        `amount_usdc ${formatUsdc(amountRaw)} is more than the wallet's USDC balance of ${formatUsdc(balance)}`,
      );
    }
    const { receipts } = await session.send(
      [
        {
          label: 'approve',
          address: chain.deployment.usdc,
          abi: MockUSDC.abi,
          functionName: 'approve',
          args: [vault, amountRaw],
        },
        {
          label: 'deposit',
          address: vault,
          abi: SandboxVault.abi,
          functionName: 'deposit',
          args: [amountRaw, session.address],
          gas: DEPOSIT_GAS,
        },
      ],
      record,
    );
    const shares = await chain.publicClient.readContract({
      address: vault,
      abi: SandboxVault.abi,
      functionName: 'balanceOf',
      args: [session.address],
    });
    return {
      agentAddress: session.address,
      approveTx: receipts[0]?.transactionHash as Hash,
      depositTx: receipts[1]?.transactionHash as Hash,
      shares,
    };
  });
  return { ...result, vault, vaultName: VAULT_CONFIG[vaultId].name };
}
