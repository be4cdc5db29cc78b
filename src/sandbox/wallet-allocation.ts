import type { Address } from 'viem';
import { ChainUnavailableError } from './chain/errors.ts';
import type { SandboxChain } from './chain/index.ts';
import { usdcBalanceOf } from './chain/vaults.ts';
import { HttpError } from './errors.ts';
import { IndexUnavailableError } from './indexer/failure.ts';
import type { IndexReads } from './indexer/index-reads.ts';
import { createKeyedLock } from './keyed-lock.ts';
import type { Store } from './store/index.ts';

/** More used wallets than this in a row is no lost state but a fault: the registration fails. */
const MAX_SKIPPED = 1000;

/**
 * Hands out the HD indexes of new agents' server-side wallets: the next one whose address has
 * no history, neither on the chain (a transaction sent, an ETH or USDC balance) nor in the
 * index. An address with history belongs to an agent that sandbox.db no longer knows (its
 * writes were lost) or was used by someone else over the RPC URL: handing it out would give a
 * new agent another's funds, and show another's history in /v1 as its own. Indexes are
 * reserved here, one registration at a time, so that concurrent registrations each get their
 * own; the registration's commit then takes it (store.takeWalletIndex).
 */
export function createWalletAllocator(deps: {
  store: Store;
  chain: SandboxChain;
  index: Pick<IndexReads, 'hasActivity'>;
  log: { warn(message: string): void };
}) {
  const { store, chain } = deps;
  const oneAtATime = createKeyedLock();
  let lastReserved = -1;

  async function hasHistory(address: Address): Promise<boolean> {
    const [nonce, eth, usdc] = await Promise.all([
      chain.publicClient.getTransactionCount({ address }),
      chain.publicClient.getBalance({ address }),
      usdcBalanceOf(chain, address),
    ]);
    if (nonce > 0 || eth > 0n || usdc > 0n) return true;
    try {
      return await deps.index.hasActivity(address);
    } catch (error) {
      // An index being rebuilt cannot say, and a wallet it would show history for must never
      // be handed out: the registration is retried once the index answers again.
      if (error instanceof IndexUnavailableError) {
        throw new HttpError(
          503,
          "the data API's index is being rebuilt, and a new wallet is handed out only once it can tell that the wallet has no history; try again shortly",
        );
      }
      throw error;
    }
  }

  return {
    /** The HD index for the next agent wallet: never one with history, never one reserved. */
    reserve(): Promise<number> {
      return oneAtATime('wallet index', async () => {
        // A chain being rebuilt may not have the history yet: the registration is retried.
        if (!(await chain.isConnected())) throw new ChainUnavailableError();
        let index = Math.max(await store.nextWalletIndex(), lastReserved + 1);
        for (let skipped = 0; ; skipped++, index++) {
          const { address } = chain.wallet(index);
          if (!(await hasHistory(address))) break;
          if (skipped >= MAX_SKIPPED) {
            throw new HttpError(
              503,
              `no server-side wallet can be handed out: ${MAX_SKIPPED} in a row from HD index ${index - skipped} have history ` +
                'on the chain or in the index that no agent in sandbox.db owns (lost writes, or wallets used over the RPC URL); ' +
                'restore the state directory from a backup',
            );
          }
          deps.log.warn(
            `the server-side wallet at HD index ${index} (${address}) has history on the chain or in the index, ` +
              'but no agent in sandbox.db owns it (lost writes, or someone used it over the RPC URL): ' +
              'it is skipped, never handed to a new agent',
          );
        }
        lastReserved = index;
        return index;
      });
    },
  };
}
export type WalletAllocator = ReturnType<typeof createWalletAllocator>;
