import { type Abi, type Address, getAddress, type Hex, keccak256, parseEther, toHex } from 'viem';
import { VAULT_IDS, type VaultId } from '../../api/schemas/index.ts';
import {
  AgentGovernor,
  AgentOnboarding,
  AgentPass,
  ConfigurableVault,
  MockUSDC,
  ProtocolToken,
  SandboxVault,
  StrategyRegistryV3,
} from './contracts/artifacts.ts';
import { TransactionFailedError } from './errors.ts';
import type { RpcClient } from './rpc.ts';
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
  /** The block the first contract was deployed in: the data API's index starts there. */
  deployed_block?: number;
}

/** What the onboarding contract gives each new agent's wallet: 1 ETH is gas for thousands of transactions. */
export const AGENT_FUNDING = {
  eth: parseEther('1'),
  usdcRaw: 10_000n * 10n ** 6n,
  protocolTokens: parseEther('100'),
} as const;

/**
 * Each vault's name, share symbol, yearly yield in basis points and risk level (the data
 * API's). `configurable` is the ERC-7540 asynchronous vault; the others are ERC-4626.
 */
export const VAULT_CONFIG: Record<
  VaultId,
  {
    name: string;
    symbol: string;
    apyBps: number;
    riskLevel: 'conservative' | 'moderate' | 'aggressive';
    async: boolean;
  }
> = {
  conservative: {
    name: 'Conservative USDC Vault',
    symbol: 'avCONS',
    apyBps: 400,
    riskLevel: 'conservative',
    async: false,
  },
  moderate: {
    name: 'Moderate USDC Vault',
    symbol: 'avMOD',
    apyBps: 800,
    riskLevel: 'moderate',
    async: false,
  },
  aggressive: {
    name: 'Aggressive USDC Vault',
    symbol: 'avAGGR',
    apyBps: 1500,
    riskLevel: 'aggressive',
    async: false,
  },
  inverse: {
    name: 'Inverse USDC Vault',
    symbol: 'avINV',
    apyBps: 600,
    riskLevel: 'aggressive',
    async: false,
  },
  hedged: {
    name: 'Hedged USDC Vault',
    symbol: 'avHEDG',
    apyBps: 500,
    riskLevel: 'conservative',
    async: false,
  },
  configurable: {
    name: 'Configurable USDC Vault',
    symbol: 'avCONF',
    apyBps: 1000,
    riskLevel: 'moderate',
    async: true,
  },
};

/** The ERC-7540 vault's fulfilment delay until an admin sets another. */
export const DEFAULT_FULFILLMENT_DELAY_SECONDS = 3600;

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
  let firstBlock: number | undefined;
  const deploy = async (label: string, abi: Abi, bytecode: Hex, args: readonly unknown[]) => {
    const { receipts } = await session.send([
      { label: `deploying ${label}`, deploy: { abi, bytecode, args } },
    ]);
    firstBlock ??= Number(receipts[0]?.blockNumber ?? 0);
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
    const { name, symbol, apyBps, async } = VAULT_CONFIG[id];
    vaults[id] = async
      ? await deploy(`the ${id} vault`, ConfigurableVault.abi, ConfigurableVault.bytecode, [
          usdc,
          name,
          symbol,
          id,
          BigInt(apyBps),
          BigInt(DEFAULT_FULFILLMENT_DELAY_SECONDS),
          admin,
        ])
      : await deploy(`the ${id} vault`, SandboxVault.abi, SandboxVault.bytecode, [
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
    deployed_block: firstBlock ?? 0,
  };
}

/** The runtime code a contract must have, and the byte ranges its constructor fills in. */
interface RuntimeArtifact {
  deployedBytecode: Hex;
  immutableReferences: ReadonlyArray<{ start: number; length: number }>;
}

/** One address of a deployment and the contract that must be there. */
export interface DeployedContract {
  /** The deployment's field: `usdc`, `vaults.moderate`, … */
  field: string;
  /** The contract's name in the sources: MockUSDC, SandboxVault, … */
  contract: string;
  address: Address;
  artifact: RuntimeArtifact;
}

export function deployedContracts(deployment: Deployment): DeployedContract[] {
  const entry = (field: string, contract: string, address: Address, artifact: RuntimeArtifact) => ({
    field,
    contract,
    address,
    artifact,
  });
  return [
    entry('usdc', 'MockUSDC', deployment.usdc, MockUSDC),
    entry('protocol_token', 'ProtocolToken', deployment.protocol_token, ProtocolToken),
    entry(
      'strategy_registry',
      'StrategyRegistryV3',
      deployment.strategy_registry,
      StrategyRegistryV3,
    ),
    entry('governor', 'AgentGovernor', deployment.governor, AgentGovernor),
    entry('agent_pass', 'AgentPass', deployment.agent_pass, AgentPass),
    entry('agent_onboarding', 'AgentOnboarding', deployment.agent_onboarding, AgentOnboarding),
    ...VAULT_IDS.map((id) =>
      VAULT_CONFIG[id].async
        ? entry(`vaults.${id}`, 'ConfigurableVault', deployment.vaults[id], ConfigurableVault)
        : entry(`vaults.${id}`, 'SandboxVault', deployment.vaults[id], SandboxVault),
    ),
  ];
}

/** A deployment's address that does not hold its contract: no code there, or other code. */
export interface MisplacedContract extends DeployedContract {
  found: 'no code' | 'other code';
}

/**
 * Checks that every address of `deployment` holds the contract it names, in one batched
 * eth_getCode: the runtime code must be the compiled contract's, its immutables (which the
 * constructor fills in: token addresses, the EIP-712 domain, …) aside. A call to an address
 * without code succeeds and does nothing, so a wrong address would otherwise go unnoticed.
 */
export async function findMisplacedContracts(
  rpc: RpcClient,
  deployment: Deployment,
): Promise<MisplacedContract[]> {
  const contracts = deployedContracts(deployment);
  const codes = await rpc.batch(
    contracts.map(({ address }) => ({ method: 'eth_getCode', params: [address, 'latest'] })),
  );
  const misplaced: MisplacedContract[] = [];
  for (const [i, contract] of contracts.entries()) {
    const result = codes[i];
    // A node that limits or refuses batches is asked once per address.
    const answer = result?.ok
      ? result.value
      : await rpc.call('eth_getCode', [contract.address, 'latest']);
    const code = String(answer).toLowerCase();
    if (code === '0x' || code === '') misplaced.push({ ...contract, found: 'no code' });
    else if (!isCodeOf(code, contract.artifact)) {
      misplaced.push({ ...contract, found: 'other code' });
    }
  }
  return misplaced;
}

/** The first misplaced contract as a clause ("usdc is 0x…, which has no code …"), plus how many more. */
export function describeMisplaced(misplaced: MisplacedContract[], where: string): string {
  const [first, ...rest] = misplaced;
  if (!first) return '';
  const what =
    first.found === 'no code'
      ? `which has no code ${where}`
      : `which holds another contract than ${first.contract} ${where}`;
  const others =
    rest.length > 3
      ? `${rest.length} other addresses`
      : rest.map((entry) => entry.field).join(', ');
  const more = rest.length > 0 ? ` (and ${others} are wrong too)` : '';
  return `${first.field} is ${first.address}, ${what}${more}`;
}

/** Whether runtime `code` (lowercase hex) is the artifact's, the immutables' bytes aside. */
function isCodeOf(code: string, artifact: RuntimeArtifact): boolean {
  const expected = artifact.deployedBytecode;
  if (code.length !== expected.length) return false;
  let from = 2;
  for (const { start, length } of artifact.immutableReferences) {
    const at = 2 + 2 * start;
    if (code.slice(from, at) !== expected.slice(from, at)) return false;
    from = at + 2 * length;
  }
  return code.slice(from) === expected.slice(from);
}
