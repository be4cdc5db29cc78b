import type { Chain, Hash, PublicClient, Transport } from 'viem';
import type { StandbyStatus } from '../../api/schemas/index.ts';
import type { SandboxClock } from '../clock.ts';
import type { Store, StoreTx } from '../store/index.ts';
import type { CheckpointStore } from './checkpoint-store.ts';
import type { Deployment } from './deployment.ts';
import type { ChainLogger, LocalChain, LocalChainOptions } from './local-chain.ts';
import type { MnemonicStore } from './mnemonic.ts';
import type { TxSubmitter } from './producer.ts';
import type { RpcClient } from './rpc.ts';
import {
  type createKeyring,
  createServerWallet,
  type FeePolicy,
  type ServerWallet,
} from './wallets.ts';

/** How long /health trusts its last look at the RPC endpoint. */
const CONNECTION_CHECK_MS = 1000;

/**
 * What whoever keeps copies of the chain's state (the index) is told, given by the composition
 * root (runtime.ts): the chain knows nothing of who listens.
 */
export interface ChainHooks<Observed = unknown>
  extends Pick<
    LocalChainOptions<Observed>,
    'observeAtCheckpoint' | 'afterCheckpoint' | 'afterRebuild' | 'checkUnlogged'
  > {
  /**
   * Runs after each write is durable and before it is answered, with the highest block it
   * went into (undefined: the chain's head), so that its author reads it back at once. The
   * write's submitter awaits it; it must not throw (the write has happened whatever it says).
   */
  afterWrite(block: number | undefined): Promise<void>;
}

export interface ChainOptions<Observed = unknown> {
  /** This machine's files of the chain (anvil's pid files, its log). */
  stateDir: string;
  /** Where the chain's checkpoints are kept: the state dir's chain/, or the database. */
  checkpoints: CheckpointStore;
  /** Where the wallet mnemonic is kept: wallet.mnemonic, or sealed in the database. */
  mnemonic: MnemonicStore;
  persistent: boolean;
  clock: SandboxClock;
  store: Store;
  /** Identifies this sandbox's state; checkpoints carry it. */
  sandboxId: string;
  log: ChainLogger;
  /** An existing node instead of the sandbox's own anvil. */
  rpcUrl?: string;
  /** Contract addresses on a node that is not a dev chain. */
  deploymentFile?: string;
  /** How long new blocks wait for an automatic checkpoint, if not the default (tests). */
  checkpointAfterMs?: number;
  hooks: ChainHooks<Observed>;
}

/** The running chain as the routes see it. */
export interface SandboxChain {
  rpcUrl: string;
  chainId: number;
  chainName: string;
  /** True when the chain accepts anvil's dev methods (time travel, balances). */
  dev: boolean;
  publicClient: PublicClient<Transport, Chain>;
  deployment: Deployment;
  treasury: ServerWallet;
  faucet: ServerWallet;
  /** The server-side wallet at HD index `index`. */
  wallet(index: number): ServerWallet;
  /**
   * Moves chain time on by `seconds` (a block is mined that much past the later of sandbox
   * time and the chain's last block) and runs `record` in the commit that makes the block
   * durable, with the time the block carries (sandbox time is at least that once it is in).
   */
  advanceTime<T>(
    seconds: number,
    record: (tx: StoreTx, blockTime: number) => Promise<T>,
  ): Promise<T>;
  /** False while the RPC endpoint does not answer, or the chain is being rebuilt. */
  isConnected(): Promise<boolean>;
  /** Sandbox time, which chain time follows: the timestamp the next block will carry. */
  nowSeconds(): number;
  /**
   * After the chain was restored to a snapshot: every server-side wallet (the treasury, the
   * faucet, the agents') reads its nonce from the chain again at its next send.
   */
  forgetNonces(): void;
  /**
   * Takes a checkpoint now and resolves, once it is on disk, with the block it holds;
   * undefined on a chain the sandbox does not own (which keeps its own history). Rejects,
   * saying why, when the chain may not be checkpointed (it is being rebuilt, or it no longer
   * matches the log).
   */
  checkpoint(): Promise<number | undefined>;
  /** The warm standby's state (`none` on a chain the sandbox does not own). */
  standby(): StandbyStatus;
  close(): Promise<void>;
}

/** What the index follows on this chain, and how (runtime.ts opens the index with it). */
export interface IndexFollow {
  rpc: RpcClient;
  chainId: number;
  deployment: Deployment;
  /** Blocks this deep are taken as final (0 on a dev chain, where nothing reorganises). */
  finalityDepth: number;
  /** The first block to index, when not the chain's first. */
  startBlock?: number;
  /** The highest block the index may take: only blocks already in sandbox.db's chain log. */
  ceiling?(): number;
  /** True while the chain is being rebuilt: the index's poll waits. */
  recovering?(): boolean;
  /**
   * The head of the chain rebuilt from sandbox.db: an index that holds what it does not
   * witnesses writes sandbox.db lost.
   */
  witnessFor?: { number: number; hash: Hash };
}

/** A chain started, with what the composition root wires to it. */
export interface StartedChain {
  chain: SandboxChain;
  follow: IndexFollow;
  /**
   * The checks that come once the index is open (on the sandbox's own chain: sandbox.db
   * knows every agent the chain holds; the clock catches up with the chain's last block).
   */
  afterIndexOpened(): Promise<void>;
  /** Stops what was started, without a final checkpoint: the start failed after the chain's. */
  abandon(): Promise<void>;
  /**
   * The sandbox's own chain (undefined on another): its producer (head, exclusive), its
   * checkpoints and recovery, for what holds the whole state (snapshot and restore).
   */
  local?: LocalChain;
}

/** The server-side wallets by HD index, each built once. */
export function walletRegistry(
  keyring: ReturnType<typeof createKeyring>,
  publicClient: PublicClient<Transport, Chain>,
  submitter: TxSubmitter,
  fees: FeePolicy,
) {
  const wallets = new Map<number, ServerWallet>();
  const wallet = (index: number) => {
    let found = wallets.get(index);
    if (!found) {
      found = createServerWallet(keyring(index), publicClient, submitter, fees);
      wallets.set(index, found);
    }
    return found;
  };
  /** Every wallet made so far reads its nonce from the chain at its next send. */
  wallet.forgetNonces = () => {
    for (const each of wallets.values()) each.forgetNonce();
  };
  return wallet;
}

export function connectionCheck(probe: RpcClient, busy: () => boolean) {
  let lastCheck = { at: 0, connected: true };
  let checking: Promise<boolean> | undefined;
  return async () => {
    if (busy()) return false;
    if (Date.now() - lastCheck.at < CONNECTION_CHECK_MS) return lastCheck.connected;
    checking ??= probe
      .call('eth_blockNumber')
      .then(
        () => true,
        () => false,
      )
      .then((connected) => {
        lastCheck = { at: Date.now(), connected };
        checking = undefined;
        return connected;
      });
    return checking;
  };
}
