import { type Abi, type Address, getAddress, type Hex } from 'viem';
import { VAULT_IDS, type VaultId } from '../../api/schemas/index.ts';
import {
  AgentGovernor,
  AgentPass,
  MockUSDC,
  ProtocolToken,
  SandboxVault,
  StrategyRegistryV3,
} from './contracts/artifacts.ts';
import { TransactionFailedError } from './errors.ts';
import type { ServerWallet, WalletSession } from './wallets.ts';

/** Where the protocol's contracts live on the chain. */
export interface Deployment {
  usdc: Address;
  protocol_token: Address;
  strategy_registry: Address;
  governor: Address;
  agent_pass: Address;
  vaults: Record<VaultId, Address>;
}

/** Each vault's name, share symbol and yearly yield in basis points. */
export const VAULT_CONFIG: Record<VaultId, { name: string; symbol: string; apyBps: number }> = {
  conservative: { name: 'Conservative USDC Vault', symbol: 'avCONS', apyBps: 400 },
  moderate: { name: 'Moderate USDC Vault', symbol: 'avMOD', apyBps: 800 },
  aggressive: { name: 'Aggressive USDC Vault', symbol: 'avAGGR', apyBps: 1500 },
  inverse: { name: 'Inverse USDC Vault', symbol: 'avINV', apyBps: 600 },
  hedged: { name: 'Hedged USDC Vault', symbol: 'avHEDG', apyBps: 500 },
  configurable: { name: 'Configurable USDC Vault', symbol: 'avCONF', apyBps: 1000 },
};

/** How long a proposal stays open for votes. */
export const VOTING_PERIOD_SECONDS = 7 * 24 * 3600;

const MINTER_ROLE = '0x9f2df0fed2c77648de5860a4cc508cd0818c85b8b8a1ab4ceeef8d981c8956a6' as Hex;

/**
 * Deploys every contract from the treasury, which keeps the admin, minter, guardian and
 * proposer roles, and lets each vault mint its own yield.
 */
export function deployProtocol(treasury: ServerWallet): Promise<Deployment> {
  return treasury.exclusive((session) => deployFrom(session));
}

async function deployFrom(session: WalletSession): Promise<Deployment> {
  const admin = session.address;
  const deploy = async (label: string, abi: Abi, bytecode: Hex, args: readonly unknown[]) => {
    const receipt = await session.send({
      label: `deploying ${label}`,
      deploy: { abi, bytecode, args },
    });
    if (!receipt.contractAddress) {
      throw new TransactionFailedError(`deploying ${label}`, 'no contract was created');
    }
    return getAddress(receipt.contractAddress);
  };

  const usdc = await deploy('MockUSDC', MockUSDC.abi, MockUSDC.bytecode, [admin]);
  const token = await deploy('ProtocolToken', ProtocolToken.abi, ProtocolToken.bytecode, [admin]);
  const registry = await deploy(
    'StrategyRegistryV3',
    StrategyRegistryV3.abi,
    StrategyRegistryV3.bytecode,
    [admin],
  );
  const governor = await deploy('AgentGovernor', AgentGovernor.abi, AgentGovernor.bytecode, [
    token,
    BigInt(VOTING_PERIOD_SECONDS),
    admin,
  ]);
  const pass = await deploy('AgentPass', AgentPass.abi, AgentPass.bytecode, [admin]);
  const vaults = {} as Record<VaultId, Address>;
  for (const id of VAULT_IDS) {
    const { name, symbol, apyBps } = VAULT_CONFIG[id];
    vaults[id] = await deploy(`the ${id} vault`, SandboxVault.abi, SandboxVault.bytecode, [
      usdc,
      name,
      symbol,
      id,
      BigInt(apyBps),
      admin,
    ]);
  }
  await session.sendAll(
    VAULT_IDS.map((id) => ({
      label: `letting the ${id} vault mint its yield`,
      address: usdc,
      abi: MockUSDC.abi,
      functionName: 'grantRole',
      args: [MINTER_ROLE, vaults[id]],
    })),
  );
  return {
    usdc,
    protocol_token: token,
    strategy_registry: registry,
    governor,
    agent_pass: pass,
    vaults,
  };
}
