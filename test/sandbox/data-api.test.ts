import { type Address, createWalletClient, erc20Abi, type Hash, http, parseUnits } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { baseSepolia } from 'viem/chains';
import { describe, expect, it } from 'vitest';
import { SandboxVault } from '../../src/sandbox/chain/contracts/artifacts.ts';
import { type ChainReader, call, chainAgent, useChainSandbox } from '../helpers/chain.ts';
import { admin, type TestSandbox } from '../helpers/sandbox.ts';

let sandbox: TestSandbox;
let reader: ChainReader;
useChainSandbox((started, chain) => {
  sandbox = started;
  reader = chain;
});

const get = async (url: string) => {
  const response = await sandbox.app.inject({ url });
  // biome-ignore lint/suspicious/noExplicitAny: bodies are checked field by field
  return { status: response.statusCode, body: response.json() as any };
};

/** What the chain says, read with our own viem client, independently of the index. */
async function onchain(vault: Address, owner: Address) {
  const read = (functionName: 'balanceOf' | 'convertToAssets', args: [Address] | [bigint]) =>
    reader.readContract({ address: vault, abi: SandboxVault.abi, functionName, args } as never);
  const shares = (await read('balanceOf', [owner])) as bigint;
  return { shares, value: (await read('convertToAssets', [shares])) as bigint };
}

describe('the data API reads its own writes', () => {
  it('shows a Part A deposit in /v1 as soon as the deposit is answered, with the chain’s values', async () => {
    const agent = await chainAgent(sandbox);
    const deposit = await call(sandbox, agent.apiKey, 'POST', '/api/v1/agent/vault/deposit', {
      vault_id: 'moderate',
      amount_usdc: 12.5,
    });
    expect(deposit.statusCode).toBe(200);
    const depositTx = deposit.json().deposit_tx as Hash;
    // No waiting: the write was indexed before it was answered.
    const history = await get(`/v1/users/${agent.agentAddress.toLowerCase()}/transactions`);
    expect(history.status).toBe(200);
    const receipt = await reader.getTransactionReceipt({ hash: depositTx });
    const block = await reader.getBlock({ blockNumber: receipt.blockNumber });
    const vault = sandbox.chain.deployment.vaults.moderate;
    const state = await onchain(vault, agent.agentAddress);
    expect(history.body).toEqual({
      address: agent.agentAddress,
      transactions: [
        {
          hash: depositTx,
          type: 'deposit',
          vault,
          user: agent.agentAddress,
          amount: '12500000',
          shares: state.shares.toString(),
          status: 'fulfilled',
          timestamp: new Date(Number(block.timestamp) * 1000).toISOString().replace('.000Z', 'Z'),
          blockNumber: Number(receipt.blockNumber),
          logIndex: expect.any(Number),
        },
      ],
      total: 1,
      limit: 50,
      offset: 0,
    });

    const positions = await get(`/v1/users/${agent.agentAddress}/positions`);
    expect(positions.status).toBe(200);
    expect(positions.body.positions).toEqual([
      {
        vault,
        vaultName: 'Moderate USDC Vault',
        shares: state.shares.toString(),
        value: state.value.toString(),
        pnl: (state.value - 12_500_000n).toString(),
        pnlPercent: expect.any(Number),
        depositedAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/),
        pendingDeposit: '0',
        claimableDeposit: '0',
        pendingRedeem: '0',
        claimableRedeem: '0',
      },
    ]);
  });

  it('shows activity that did not come through the service (a vault called over the RPC URL) within a second', async () => {
    const account = privateKeyToAccount(generatePrivateKey());
    const funded = await admin(sandbox.app, 'POST', '/sandbox/fund', {
      address: account.address,
      usdc: 100,
      eth: 1,
    });
    expect(funded.statusCode).toBe(200);
    const wallet = createWalletClient({
      account,
      chain: baseSepolia,
      transport: http(sandbox.chain.rpcUrl),
    });
    const vault = sandbox.chain.deployment.vaults.hedged;
    const send = async (hash: Promise<Hash>) => {
      const receipt = await reader.waitForTransactionReceipt({
        hash: await hash,
        pollingInterval: 50,
      });
      expect(receipt.status).toBe('success');
      return receipt;
    };
    // A vault call accrues yield first: mined later than its estimate, it takes the minting
    // path and more gas. A margin, as docs/chain.md advises direct callers.
    const gas = 300_000n;
    await send(
      wallet.writeContract({
        address: sandbox.chain.deployment.usdc,
        abi: erc20Abi,
        functionName: 'approve',
        args: [vault, parseUnits('100', 6)],
      }),
    );
    await send(
      wallet.writeContract({
        address: vault,
        abi: SandboxVault.abi,
        functionName: 'deposit',
        args: [parseUnits('40', 6), account.address],
        gas,
      }),
    );
    const withdrawn = await send(
      wallet.writeContract({
        address: vault,
        abi: SandboxVault.abi,
        functionName: 'withdraw',
        args: [parseUnits('15', 6), account.address, account.address],
        gas,
      }),
    );
    const mined = Date.now();
    let body: { transactions: Array<{ type: string; amount: string; blockNumber: number }> };
    for (;;) {
      body = (await get(`/v1/users/${account.address}/transactions`)).body;
      if (body.transactions.length === 2 || Date.now() - mined > 1000) break;
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
    expect(Date.now() - mined).toBeLessThanOrEqual(1000);
    expect(body.transactions.map((tx) => [tx.type, tx.amount])).toEqual([
      ['withdraw', '15000000'],
      ['deposit', '40000000'],
    ]);
    expect(body.transactions[0]?.blockNumber).toBe(Number(withdrawn.blockNumber));
    const state = await onchain(vault, account.address);
    const [position] = (await get(`/v1/users/${account.address}/positions`)).body.positions;
    expect(position).toMatchObject({
      shares: state.shares.toString(),
      value: state.value.toString(),
      pnl: (state.value - 25_000_000n).toString(),
    });

    // Shares received by a transfer make a position dated by that transfer.
    const receiver = privateKeyToAccount(generatePrivateKey()).address;
    const transfer = await send(
      wallet.writeContract({
        address: vault,
        abi: SandboxVault.abi,
        functionName: 'transfer',
        args: [receiver, 5_000_000n],
        gas,
      }),
    );
    const { timestamp } = await reader.getBlock({ blockNumber: transfer.blockNumber });
    let received: Array<{ shares: string; depositedAt: string | null }> = [];
    for (const started = Date.now(); received.length === 0 && Date.now() - started < 1000; ) {
      received = (await get(`/v1/users/${receiver}/positions`)).body.positions;
      if (received.length === 0) await new Promise((resolve) => setTimeout(resolve, 25));
    }
    expect(received).toEqual([
      expect.objectContaining({
        shares: '5000000',
        depositedAt: new Date(Number(timestamp) * 1000).toISOString().replace('.000Z', 'Z'),
      }),
    ]);
  });
});

describe('paging and bad input', () => {
  it('pages newest first, filters by type, and gives empty lists past the end or for no activity', async () => {
    const agent = await chainAgent(sandbox);
    for (const vault_id of ['conservative', 'aggressive', 'inverse']) {
      const deposit = await call(sandbox, agent.apiKey, 'POST', '/api/v1/agent/vault/deposit', {
        vault_id,
        amount_usdc: 1,
      });
      expect(deposit.statusCode).toBe(200);
    }
    const base = `/v1/users/${agent.agentAddress}/transactions`;
    const all = (await get(base)).body;
    expect(all.total).toBe(3);
    const vaults = sandbox.chain.deployment.vaults;
    expect(all.transactions.map((tx: { vault: string }) => tx.vault)).toEqual([
      vaults.inverse,
      vaults.aggressive,
      vaults.conservative,
    ]);
    const second = (await get(`${base}?limit=1&offset=1`)).body;
    expect(second).toMatchObject({ total: 3, limit: 1, offset: 1 });
    expect(second.transactions).toEqual([all.transactions[1]]);
    expect((await get(`${base}?offset=3`)).body).toMatchObject({ transactions: [], total: 3 });
    expect((await get(`${base}?type=withdraw`)).body).toMatchObject({ transactions: [], total: 0 });
    expect((await get(`${base}?type=deposit&limit=100`)).body.total).toBe(3);
    const nobody = await get(`/v1/users/0x${'ab'.repeat(20)}/transactions`);
    expect(nobody).toEqual({
      status: 200,
      body: {
        address: expect.stringMatching(/^0x[aA][bB]/),
        transactions: [],
        total: 0,
        limit: 50,
        offset: 0,
      },
    });
    expect((await get(`/v1/users/0x${'ab'.repeat(20)}/positions`)).body.positions).toEqual([]);
  });

  it.each([
    ['/v1/users/0x1234/transactions', 400, 'INVALID_ADDRESS', 'address'],
    [`/v1/users/0x${'g'.repeat(40)}/positions`, 400, 'INVALID_ADDRESS', 'address'],
    [`/v1/users/0x${'a'.repeat(40)}/transactions?limit=0`, 400, 'INVALID_PARAMETER', 'limit'],
    [`/v1/users/0x${'a'.repeat(40)}/transactions?limit=101`, 400, 'INVALID_PARAMETER', 'limit'],
    [`/v1/users/0x${'a'.repeat(40)}/transactions?limit=2.5`, 400, 'INVALID_PARAMETER', 'limit'],
    [`/v1/users/0x${'a'.repeat(40)}/transactions?offset=-1`, 400, 'INVALID_PARAMETER', 'offset'],
    [`/v1/users/0x${'a'.repeat(40)}/transactions?type=mint`, 400, 'INVALID_PARAMETER', 'type'],
    ['/v1/no/such/thing', 404, 'NOT_FOUND', undefined],
  ])('%s answers %i %s in the spec’s error shape', async (url, status, code, parameter) => {
    const answer = await get(url);
    expect(answer.status).toBe(status);
    expect(answer.body).toEqual({
      error: {
        code,
        message: expect.any(String),
        details: parameter ? expect.objectContaining({ parameter }) : {},
      },
    });
  });
});
