import { type Address, type Hash, parseEther } from 'viem';
import type { StoreTx } from '../store/index.ts';
import { AgentPass, MockUSDC, ProtocolToken } from './contracts/artifacts.ts';
import type { SandboxChain } from './index.ts';
import { usdcBalanceOf } from './vaults.ts';

export { AGENT_FUNDING } from './deployment.ts';

/** One faucet drip. */
export const FAUCET_DRIP_WEI = parseEther('0.1');

/** Below this a wallet is reported as having no gas: about 20 simple transactions. */
export const GAS_THRESHOLD_WEI = parseEther('0.001');

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

/**
 * Sends one drip of ETH from the faucet account; `record` gets the transaction's hash and
 * commits with its block. Resolves once both are durable.
 */
export async function dripFromFaucet(
  chain: SandboxChain,
  to: Address,
  record: (tx: StoreTx, txHash: Hash) => Promise<void>,
): Promise<Hash> {
  const { receipts } = await chain.faucet.exclusive((session) =>
    session.send([{ label: 'faucet drip', to, value: FAUCET_DRIP_WEI }], (tx, [receipt]) =>
      record(tx, (receipt as { transactionHash: Hash }).transactionHash),
    ),
  );
  return (receipts[0] as { transactionHash: Hash }).transactionHash;
}

/** Sandbox admin: mints test USDC and sends ETH from the treasury. */
export async function fundAddress(
  chain: SandboxChain,
  address: Address,
  amounts: { usdcRaw?: bigint; ethWei?: bigint },
  record: (tx: StoreTx, funded: Funded) => Promise<void> = async () => {},
): Promise<Funded> {
  const requests = [
    ...(amounts.usdcRaw === undefined
      ? []
      : [
          {
            label: 'minting test USDC',
            address: chain.deployment.usdc,
            abi: MockUSDC.abi,
            functionName: 'mint',
            args: [address, amounts.usdcRaw],
          },
        ]),
    ...(amounts.ethWei === undefined
      ? []
      : [{ label: 'sending ETH', to: address, value: amounts.ethWei }]),
  ];
  const { recorded } = await chain.treasury.exclusive((session) =>
    session.send<Funded, Funded['balances']>(
      requests,
      async (tx, receipts, balances) => {
        const hashes = receipts.map((receipt) => receipt.transactionHash);
        const funded: Funded = {
          usdc: amounts.usdcRaw === undefined ? null : (hashes.shift() ?? null),
          eth: amounts.ethWei === undefined ? null : (hashes.shift() ?? null),
          balances,
        };
        await record(tx, funded);
        return funded;
      },
      // The balances the answer reports, on the block that funded them.
      { settle: () => balancesOf(chain, address) },
    ),
  );
  return recorded;
}

export interface Funded {
  usdc: Hash | null;
  eth: Hash | null;
  balances: Awaited<ReturnType<typeof balancesOf>>;
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
