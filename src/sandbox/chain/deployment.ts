import { type Abi, type Address, getAddress, type Hex, keccak256, parseEther, toHex } from 'viem';
import { VAULT_IDS, type VaultId } from '../../api/schemas/index.ts';
import {
  AgentGovernor,
  AgentOnboarding,
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
  agent_onboarding: Address;
  vaults: Record<VaultId, Address>;
}

/** What the onboarding contract gives each new agent's wallet: 1 ETH is gas for thousands of transactions. */
export const AGENT_FUNDING = {
  eth: parseEther('1'),
  usdcRaw: 10_000n * 10n ** 6n,
  protocolTokens: parseEther('100'),
} as const;

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

const MINTER_ROLE = keccak256(toHex('MINTER_ROLE'));

/**
 * Deploys every contract from the treasury, which keeps the admin, minter, guardian and
 * proposer roles; each vault may mint its own yield, and the onboarding contract may mint
 * what new agents receive. Each contract is mined before the next is deployed: a vault's
 * constructor reads its asset's decimals.
 */
export function deployProtocol(treasury: ServerWallet): Promise<Deployment> {
  return treasury.exclusive((session) => deployFrom(session));
}

async function deployFrom(session: WalletSession): Promise<Deployment> {
  const admin = session.address;
  const deploy = async (label: string, abi: Abi, bytecode: Hex, args: readonly unknown[]) => {
    const { receipts } = await session.send([
      { label: `deploying ${label}`, deploy: { abi, bytecode, args } },
    ]);
    const address = receipts[0]?.contractAddress;
    if (!address) throw new TransactionFailedError(`deploying ${label}`, 'no contract was created');
    return getAddress(address);
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
  const onboarding = await deploy(
    'AgentOnboarding',
    AgentOnboarding.abi,
    AgentOnboarding.bytecode,
    [
      usdc,
      token,
      pass,
      AGENT_FUNDING.eth,
      AGENT_FUNDING.usdcRaw,
      AGENT_FUNDING.protocolTokens,
      admin,
    ],
  );
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
  const grant = (label: string, address: Address, abi: Abi, minter: Address) => ({
    label,
    address,
    abi,
    functionName: 'grantRole',
    args: [MINTER_ROLE, minter],
  });
  await session.send([
    ...VAULT_IDS.map((id) =>
      grant(`letting the ${id} vault mint its yield`, usdc, MockUSDC.abi, vaults[id]),
    ),
    grant('letting onboarding mint USDC', usdc, MockUSDC.abi, onboarding),
    grant('letting onboarding mint protocol tokens', token, ProtocolToken.abi, onboarding),
    grant('letting onboarding mint agent passes', pass, AgentPass.abi, onboarding),
  ]);
  return {
    usdc,
    protocol_token: token,
    strategy_registry: registry,
    governor,
    agent_pass: pass,
    agent_onboarding: onboarding,
    vaults,
  };
}
