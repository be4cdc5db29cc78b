import { type Address, type Hash, parseEther } from 'viem';
import { AgentPass, MockUSDC, ProtocolToken } from './contracts/artifacts.ts';
import type { SandboxChain } from './index.ts';
import { usdcBalanceOf } from './vaults.ts';

/** What a new agent wallet receives: 1 ETH is gas for thousands of transactions. */
export const AGENT_FUNDING = {
  eth: parseEther('1'),
  usdcRaw: 10_000n * 10n ** 6n,
  protocolTokens: parseEther('100'),
} as const;

/** One faucet drip. */
export const FAUCET_DRIP_WEI = parseEther('0.1');

/** Below this a wallet is reported as having no gas: about 20 simple transactions. */
const GAS_THRESHOLD_WEI = parseEther('0.001');

/**
 * Funds a new agent's server-side wallet (ETH, test USDC, protocol tokens) and mints the
 * agent pass to its registered wallet. Resolves once every transfer has confirmed and is durable.
 */
export async function provisionAgentWallet(
  chain: SandboxChain,
  walletIndex: number,
  registeredWallet: Address,
): Promise<Address> {
  const agentAddress = chain.wallet(walletIndex).address;
  const { deployment } = chain;
  await chain.treasury.exclusive((session) =>
    session.sendAll([
      { label: 'funding the agent wallet with ETH', to: agentAddress, value: AGENT_FUNDING.eth },
      {
        label: 'minting test USDC to the agent wallet',
        address: deployment.usdc,
        abi: MockUSDC.abi,
        functionName: 'mint',
        args: [agentAddress, AGENT_FUNDING.usdcRaw],
      },
      {
        label: 'minting protocol tokens to the agent wallet',
        address: deployment.protocol_token,
        abi: ProtocolToken.abi,
        functionName: 'mint',
        args: [agentAddress, AGENT_FUNDING.protocolTokens],
      },
      {
        label: 'minting the agent pass',
        address: deployment.agent_pass,
        abi: AgentPass.abi,
        functionName: 'mint',
        args: [registeredWallet],
      },
    ]),
  );
  await chain.persist();
  return agentAddress;
}

/** ETH, USDC and protocol-token balances of a wallet, read onchain. */
export async function balancesOf(chain: SandboxChain, address: Address) {
  const [eth, usdc, tokens] = await Promise.all([
    chain.publicClient.getBalance({ address }),
    usdcBalanceOf(chain, address),
    chain.publicClient.readContract({
      address: chain.deployment.protocol_token,
      abi: ProtocolToken.abi,
      functionName: 'balanceOf',
      args: [address],
    }),
  ]);
  return { eth, usdc, tokens, hasGas: eth >= GAS_THRESHOLD_WEI };
}

/** Sends one drip of ETH from the faucet account; resolves once it is confirmed and durable. */
export async function dripFromFaucet(chain: SandboxChain, to: Address): Promise<Hash> {
  const receipt = await chain.faucet.exclusive((session) =>
    session.send({ label: 'faucet drip', to, value: FAUCET_DRIP_WEI }),
  );
  await chain.persist();
  return receipt.transactionHash;
}

/** Sandbox admin: mints test USDC and sends ETH from the treasury. */
export async function fundAddress(
  chain: SandboxChain,
  address: Address,
  amounts: { usdcRaw?: bigint; ethWei?: bigint },
) {
  const txs = await chain.treasury.exclusive(async (session) => {
    const usdc =
      amounts.usdcRaw === undefined
        ? undefined
        : await session.send({
            label: 'minting test USDC',
            address: chain.deployment.usdc,
            abi: MockUSDC.abi,
            functionName: 'mint',
            args: [address, amounts.usdcRaw],
          });
    const eth =
      amounts.ethWei === undefined
        ? undefined
        : await session.send({ label: 'sending ETH', to: address, value: amounts.ethWei });
    return { usdc: usdc?.transactionHash ?? null, eth: eth?.transactionHash ?? null };
  });
  await chain.persist();
  return txs;
}

/** Agent passes held by a wallet, enumerated onchain. */
export async function agentPassesOf(chain: SandboxChain, owner: Address) {
  const pass = chain.deployment.agent_pass;
  const read = chain.publicClient.readContract;
  const count = await read({
    address: pass,
    abi: AgentPass.abi,
    functionName: 'balanceOf',
    args: [owner],
  });
  return Promise.all(
    Array.from({ length: Number(count) }, (_, i) =>
      read({
        address: pass,
        abi: AgentPass.abi,
        functionName: 'tokenOfOwnerByIndex',
        args: [owner, BigInt(i)],
      }),
    ),
  ).then((ids) =>
    ids.map((id) => ({
      contract_address: pass,
      collection_name: 'Agent Pass',
      symbol: 'AGPASS',
      token_id: id.toString(),
    })),
  );
}
