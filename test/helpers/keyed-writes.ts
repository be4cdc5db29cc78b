import { randomUUID } from 'node:crypto';
import { type Address, decodeFunctionData, type Hex } from 'viem';
import { expect } from 'vitest';
import { SandboxVault } from '../../src/sandbox/chain/contracts/artifacts.ts';
import { registerOver, requestOver, rpcCall } from './serve.ts';

/**
 * Keyed deposits (Idempotency-Key) in bursts, and what the chain says of them: for the tests of
 * writes through kill -9 (serve-idempotency, serve-database). The chain is read over JSON-RPC,
 * not through the sandbox's own answers.
 */

export interface Answer {
  status: number;
  /** The body as sent, byte for byte. */
  text: string;
  replayed: string | null;
}

export interface KeyedWrite {
  apiKey: string;
  address: Address;
  key: string;
  amount: number;
}

/** The helpers, for serves whose admin token is `adminToken`. */
export function keyedWrites(adminToken: string) {
  const call = (url: string, method: string, path: string, body?: object, key?: string) =>
    requestOver(url, adminToken, method, path, body, key);

  /** A deposit with an Idempotency-Key; the answer as it came, unparsed. */
  async function keyedDeposit(url: string, apiKey: string, key: string, amount: number) {
    const response = await fetch(`${url}/api/v1/agent/vault/deposit`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': apiKey, 'idempotency-key': key },
      body: JSON.stringify({ vault_id: 'moderate', amount_usdc: amount }),
    });
    const answer: Answer = {
      status: response.status,
      text: await response.text(),
      replayed: response.headers.get('idempotent-replayed'),
    };
    return answer;
  }

  /** An agent registered and funded (its wallet answers once the onboarding is committed). */
  async function fundedAgent(url: string) {
    const { apiKey } = await registerOver(url);
    const wallet = await call(url, 'GET', '/api/v1/agent/wallet', undefined, apiKey);
    expect(wallet.status).toBe(200);
    return { apiKey, address: wallet.body.agent_address as Address };
  }

  async function rpcUrlOf(url: string): Promise<string> {
    return (await call(url, 'GET', '/sandbox/info')).body.rpc_url;
  }

  /** Transactions the wallet has sent, mined: 2 a deposit (approve, deposit), as its nonce says. */
  async function sentBy(rpcUrl: string, address: Address): Promise<number> {
    return Number(await rpcCall(rpcUrl, 'eth_getTransactionCount', [address, 'latest']));
  }

  /** The amount (raw USDC) of a deposit mined from `from`, read from the chain. */
  async function depositedBy(rpcUrl: string, hash: Hex, from: Address): Promise<bigint> {
    const receipt = (await rpcCall(rpcUrl, 'eth_getTransactionReceipt', [hash])) as {
      status: Hex;
      from: Address;
    } | null;
    expect(receipt?.status).toBe('0x1');
    expect(receipt?.from.toLowerCase()).toBe(from.toLowerCase());
    const transaction = (await rpcCall(rpcUrl, 'eth_getTransactionByHash', [hash])) as {
      input: Hex;
    };
    const decoded = decodeFunctionData({ abi: SandboxVault.abi, data: transaction.input });
    expect(decoded.functionName).toBe('deposit');
    return (decoded.args as readonly [bigint, Address])[0];
  }

  /**
   * `agents` agents, `perAgent` keyed deposits each, every one with its own key and amount.
   * The agents are funded one after another: one commit of writes each (the crash point counts
   * them).
   */
  async function burstOf(url: string, agents: number, perAgent: number): Promise<KeyedWrite[]> {
    const funded = [];
    for (let a = 0; a < agents; a++) funded.push(await fundedAgent(url));
    return funded.flatMap((agent, a) =>
      Array.from({ length: perAgent }, (_, i) => ({
        ...agent,
        key: randomUUID(),
        amount: a * perAgent + i + 1,
      })),
    );
  }

  /**
   * Sends every write at once, and calls `kill` once `answers` have been answered, if given;
   * resolves with the answers that came, by key, when every request has been answered or has
   * failed.
   */
  async function sendBurst(
    url: string,
    writes: KeyedWrite[],
    killAfter?: { answers: number; kill: () => void },
  ): Promise<Map<string, Answer>> {
    const answered = new Map<string, Answer>();
    await Promise.all(
      writes.map(async (write) => {
        const answer = await keyedDeposit(url, write.apiKey, write.key, write.amount).catch(
          () => undefined,
        );
        if (!answer) return;
        answered.set(write.key, answer);
        if (answered.size === killAfter?.answers) killAfter.kill();
      }),
    );
    return answered;
  }

  /**
   * Every key's deposit is on the chain once: each answer (a 200) names a deposit of the key's
   * own amount, mined from the agent's wallet, no two answers the same deposit, and each
   * wallet has sent 2 transactions per key (approve and deposit), no more.
   */
  async function expectOnceEach(rpcUrl: string, writes: KeyedWrite[], final: Map<string, Answer>) {
    const hashes = new Set<string>();
    for (const write of writes) {
      const answer = final.get(write.key) as Answer;
      expect(answer.status).toBe(200);
      const body = JSON.parse(answer.text) as { deposit_tx: Hex };
      hashes.add(body.deposit_tx);
      expect(await depositedBy(rpcUrl, body.deposit_tx, write.address)).toBe(
        BigInt(write.amount) * 10n ** 6n,
      );
    }
    expect(hashes.size).toBe(writes.length);
    for (const address of new Set(writes.map((write) => write.address))) {
      const keys = writes.filter((write) => write.address === address).length;
      expect(await sentBy(rpcUrl, address)).toBe(2 * keys);
    }
  }

  return {
    keyedDeposit,
    fundedAgent,
    rpcUrlOf,
    sentBy,
    depositedBy,
    burstOf,
    sendBurst,
    expectOnceEach,
  };
}
