import type { Chain, PublicClient, Transport } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { CHAIN_ID, CHAIN_NAME, VAULT_IDS } from '../../api/schemas/index.ts';
import type { SandboxClock } from '../clock.ts';
import { StartupError } from '../errors.ts';
import type { Store } from '../store/index.ts';
import { automaticCheckpoints } from './checkpoint-mode.ts';
import { createChainClients, SANDBOX_FEES } from './clients.ts';
import { AgentOnboarding, SandboxVault } from './contracts/artifacts.ts';
import type { Deployment } from './deployment.ts';
import { tracedRevertReason } from './errors.ts';
import { type LocalChain, startLocalChain } from './local-chain.ts';
import type { TxSubmitter } from './producer.ts';
import {
  type ChainOptions,
  connectionCheck,
  type StartedChain,
  walletRegistry,
} from './sandbox-chain.ts';
import { type createKeyring, createServerWallet, GENESIS_KEYS } from './wallets.ts';

/** Fixed gas for a vault's accrue() (an estimate needs the block's new time). */
const ACCRUE_GAS = 150_000n;

/**
 * The sandbox's own chain: an anvil restored from its checkpoint and log (or from the genesis
 * checkpoint when new), mined by the block producer, every write logged in sandbox.db.
 */
export async function startOwnChain<Observed>(
  options: ChainOptions<Observed>,
  keyring: ReturnType<typeof createKeyring>,
): Promise<StartedChain> {
  const { hooks } = options;
  const local: LocalChain = await startLocalChain<Observed>({
    stateDir: options.stateDir,
    checkpoints: options.checkpoints,
    sandboxId: options.sandboxId,
    store: options.store,
    clock: options.clock,
    log: options.log,
    revertReason: tracedRevertReason,
    ...(hooks.observeAtCheckpoint && { observeAtCheckpoint: hooks.observeAtCheckpoint }),
    ...(hooks.afterCheckpoint && { afterCheckpoint: hooks.afterCheckpoint }),
    // serve refused any value but `manual` at start.
    automaticCheckpoints: automaticCheckpoints() !== false,
    checkpointAfterMs: options.checkpointAfterMs,
    ...(hooks.afterRebuild && { afterRebuild: hooks.afterRebuild }),
    ...(hooks.checkUnlogged && { checkUnlogged: hooks.checkUnlogged }),
  });
  const { publicClient } = createChainClients(local.nodeUrl, CHAIN_ID, CHAIN_NAME, local.fetch);
  const submitter: TxSubmitter = {
    async submit(submission) {
      const submitted = await local.producer.submit(submission);
      void local.afterCommit();
      await hooks.afterWrite(local.producer.head().number);
      return submitted;
    },
  };
  const wallet = walletRegistry(keyring, publicClient, submitter, SANDBOX_FEES);
  const treasury = createServerWallet(
    privateKeyToAccount(GENESIS_KEYS.treasury),
    publicClient,
    submitter,
    SANDBOX_FEES,
  );
  const faucet = createServerWallet(
    privateKeyToAccount(GENESIS_KEYS.faucet),
    publicClient,
    submitter,
    SANDBOX_FEES,
  );
  return {
    chain: {
      rpcUrl: local.rpcUrl,
      chainId: CHAIN_ID,
      chainName: CHAIN_NAME,
      dev: true,
      publicClient,
      deployment: local.deployment,
      treasury,
      faucet,
      wallet,
      forgetNonces() {
        for (const each of [treasury, faucet]) each.forgetNonce();
        wallet.forgetNonces();
      },
      async advanceTime(seconds, record) {
        // The block that carries the new time also accrues every vault's yield: the jump in
        // value is then on the chain (YieldAccrued), and the data API's subscribers hear of it.
        const { recorded } = await treasury.exclusive((session) =>
          session.send(
            VAULT_IDS.map((id) => ({
              label: `accruing the ${id} vault's yield`,
              address: local.deployment.vaults[id],
              abi: SandboxVault.abi,
              functionName: 'accrue',
              gas: ACCRUE_GAS,
            })),
            (tx, _receipts, blockTime: number) => record(tx, blockTime),
            {
              advance: seconds,
              // The block's time, which the answer reports (it may be past sandbox time
              // plus the advance, after a block mined ahead over the RPC URL).
              settle: async ([receipt]) =>
                Number(
                  (await publicClient.getBlock({ blockNumber: receipt?.blockNumber as bigint }))
                    .timestamp,
                ),
            },
          ),
        );
        return recorded;
      },
      isConnected: connectionCheck(local.rpc, () => local.recovering()),
      nowSeconds: () => options.clock.nowSeconds(),
      // Asked for: taken even without new blocks, to keep what cheat methods changed.
      checkpoint: () => local.checkpoint({ evenWithoutNewBlocks: true }),
      standby: () => local.standby.status(),
      // The final checkpoint tells afterCheckpoint (the index must still be open).
      close: () => local.close({ checkpoint: options.persistent }),
    },
    follow: {
      rpc: local.rpc,
      chainId: CHAIN_ID,
      deployment: local.deployment,
      finalityDepth: 0,
      // Only blocks already in sandbox.db's chain log: then the index never holds a block
      // that sandbox.db does not, unless sandbox.db lost it, and a rebuild, which brings back
      // every logged block, never finds it ahead. It waits while the chain is rebuilt.
      ceiling: () => local.producer.head().number,
      recovering: () => local.recovering(),
      witnessFor: local.producer.head(),
    },
    async afterIndexOpened() {
      await checkAgentsAgainstChain(options.store, publicClient, local.deployment);
      await catchUpClock(options.clock, options.store, local.producer.head().timestamp);
    },
    abandon: () => local.close({ checkpoint: false }),
    local,
  };
}

/**
 * Refuses a database that does not know every agent the chain holds (an older or lost
 * sandbox.db): its next registration would hand an existing agent's funded wallet to a new
 * agent. Every onboarding commits with its agent's row, so the two counts are always equal.
 */
async function checkAgentsAgainstChain(
  store: Store,
  publicClient: PublicClient<Transport, Chain>,
  deployment: Deployment,
): Promise<void> {
  const onboarded = await publicClient.readContract({
    address: deployment.agent_onboarding,
    abi: AgentOnboarding.abi,
    functionName: 'onboardedCount',
  });
  // Agents in the onboarding outbox are registered but not funded yet.
  const known = (await store.agents.count()) - (await store.onboarding.count());
  if (BigInt(known) !== onboarded) {
    throw new StartupError(
      `the chain holds ${onboarded} onboarded agents but sandbox.db knows ${known}: ` +
        'the database is not the one this chain was built with (was an older copy restored?); ' +
        'restore the whole state directory from one backup',
    );
  }
}

/** Chain time never goes back: the sandbox clock moves up to just past the chain's last block. */
async function catchUpClock(
  clock: SandboxClock,
  store: Store,
  latestTimestamp: number,
): Promise<void> {
  if (clock.nowSeconds() <= latestTimestamp) {
    await store.transaction((tx) => clock.raiseTo(tx, latestTimestamp + 1));
  }
}
