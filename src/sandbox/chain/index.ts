import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  type Address,
  type Chain,
  createPublicClient,
  createTestClient,
  defineChain,
  http,
  type PublicClient,
  parseEther,
  type Transport,
} from 'viem';
import { CHAIN_ID, CHAIN_NAME, ContractAddresses } from '../../api/schemas/index.ts';
import type { SandboxClock } from '../clock.ts';
import { HttpError, StartupError } from '../errors.ts';
import { type AnvilProcess, startAnvil } from './anvil.ts';
import { type Deployment, deployProtocol } from './deployment.ts';
import { isUnreachable, revertReason } from './errors.ts';
import { createPersister, readSnapshot, SNAPSHOT_FORMAT, writeSnapshot } from './snapshot.ts';
import {
  ACCOUNT_INDEX,
  createKeyring,
  createServerWallet,
  loadOrCreateMnemonic,
  type ServerWallet,
} from './wallets.ts';

export type { Deployment } from './deployment.ts';

const DEPLOYMENT_FILE = 'deployment.json';
/** What the treasury and the faucet hold on a dev chain, topped up at every start. */
const DEV_TREASURY_ETH = parseEther('1000000');
const DEV_FAUCET_ETH = parseEther('100000');
/** How long /health trusts its last look at the RPC endpoint. */
const CONNECTION_CHECK_MS = 1000;

export interface ChainOptions {
  stateDir: string;
  persistent: boolean;
  clock: SandboxClock;
  /** An existing node instead of the sandbox's own anvil. */
  rpcUrl?: string;
  /** Contract addresses on a node that is not a dev chain. */
  deploymentFile?: string;
  /** Agents exist off-chain, so a missing snapshot means lost state, not a new sandbox. */
  hasAgents: boolean;
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
  /** Resolves once every transaction confirmed so far is durable (a no-op without --state). */
  persist(): Promise<void>;
  /** Moves chain time to the sandbox clock and mines a block, so views see the new time. */
  syncTime(): Promise<void>;
  isConnected(): Promise<boolean>;
  /** Sandbox time, which chain time follows: the timestamp the next block will carry. */
  nowSeconds(): number;
  close(): Promise<void>;
}

/**
 * Starts (or connects to) the chain, restores or deploys the protocol, and funds the
 * sandbox's own accounts. With its own anvil and a persistent state dir, the chain is
 * restored from the snapshot and a new snapshot is written after every acknowledged write.
 */
export async function startChain(options: ChainOptions): Promise<SandboxChain> {
  const keyring = createKeyring(loadOrCreateMnemonic(options.stateDir));
  let anvil: AnvilProcess | undefined;
  try {
    anvil = options.rpcUrl ? undefined : await startAnvil({ stateDir: options.stateDir });
    const rpcUrl = anvil?.rpcUrl ?? (options.rpcUrl as string);
    return await connect(options, rpcUrl, keyring, anvil);
  } catch (error) {
    await anvil?.stop();
    if (isUnreachable(error)) {
      throw new StartupError(`cannot reach the chain at ${options.rpcUrl ?? 'the sandbox anvil'}`);
    }
    throw error;
  }
}

async function connect(
  options: ChainOptions,
  rpcUrl: string,
  keyring: ReturnType<typeof createKeyring>,
  anvil: AnvilProcess | undefined,
): Promise<SandboxChain> {
  const probe = createPublicClient({ transport: http(rpcUrl, { retryCount: 0, timeout: 5000 }) });
  const chainId = await probe.getChainId();
  const chainName = chainId === CHAIN_ID ? CHAIN_NAME : `chain ${chainId}`;
  const chain = defineChain({
    id: chainId,
    name: chainName,
    nativeCurrency: { name: 'Ether', symbol: 'ETH', decimals: 18 },
    rpcUrls: { default: { http: [rpcUrl] } },
  });
  // No automatic retries: a resent eth_sendRawTransaction whose first attempt landed would
  // be reported as a failure of a transaction that happened.
  const transport = http(rpcUrl, { retryCount: 0, timeout: 30_000 });
  const publicClient = createPublicClient({ chain, transport, pollingInterval: 50 });
  const testClient = createTestClient({ chain, transport, mode: 'anvil' });
  const dev = anvil !== undefined || (await isDevChain(testClient));

  const wallets = new Map<number, ServerWallet>();
  const wallet = (index: number) => {
    let found = wallets.get(index);
    if (!found) {
      found = createServerWallet(keyring(index), publicClient);
      wallets.set(index, found);
    }
    return found;
  };
  const treasury = wallet(ACCOUNT_INDEX.treasury);
  const faucet = wallet(ACCOUNT_INDEX.faucet);

  const snapshotting = anvil !== undefined && options.persistent;
  const snapshot = snapshotting ? readSnapshot(options.stateDir) : undefined;
  if (snapshot) {
    if (snapshot.chain_id !== chainId) {
      throw new StartupError(
        `the chain snapshot is for chain ${snapshot.chain_id}, not ${chainId}`,
      );
    }
    try {
      await testClient.loadState({ state: snapshot.state });
    } catch (error) {
      throw new StartupError(
        `anvil could not load the chain snapshot in ${options.stateDir}: ${revertReason(error).split('\n')[0]}`,
      );
    }
  }

  const syncTime = async () => {
    if (!dev) return;
    // anvil_setTime moves anvil's clock (it then runs on in real time), even backwards.
    await testClient.request({
      method: 'anvil_setTime',
      params: [options.clock.nowSeconds()],
    } as never);
    await testClient.mine({ blocks: 1 });
  };
  if (dev) {
    await syncTime();
    await topUp(testClient, publicClient, treasury.address, DEV_TREASURY_ETH);
    await topUp(testClient, publicClient, faucet.address, DEV_FAUCET_ETH);
  }

  let deployment = snapshot?.deployment ?? readDeployment(options, dev);
  let fresh = false;
  if (!deployment || !(await hasCode(publicClient, deployment.strategy_registry))) {
    if (!dev) {
      throw new StartupError(
        deployment
          ? `no contract at ${deployment.strategy_registry} on ${rpcUrl}: check --deployment`
          : `${rpcUrl} is not a dev chain and no contracts are known there: pass --deployment FILE`,
      );
    }
    // Deploying afresh would orphan every agent's wallet, shares and strategies.
    if (deployment || options.hasAgents) {
      throw new StartupError(
        snapshotting
          ? `${options.stateDir} has sandbox data but its chain is gone (no usable chain snapshot); start with a new --state directory`
          : `the protocol's contracts are gone from ${rpcUrl} (was the chain reset?); start with a new --state directory`,
      );
    }
    deployment = await deployProtocol(treasury);
    fresh = true;
    if (!anvil) writeFileSync(join(options.stateDir, DEPLOYMENT_FILE), JSON.stringify(deployment));
  }
  const deployed = deployment;

  const persister = createPersister(async () => {
    const state = await testClient.dumpState();
    writeSnapshot(options.stateDir, {
      format: SNAPSHOT_FORMAT,
      chain_id: chainId,
      saved_at: options.clock.nowSeconds(),
      deployment: deployed,
      state,
    });
  });
  const persist = snapshotting
    ? () =>
        persister.persist().catch((error: unknown) => {
          throw new HttpError(
            503,
            `the transaction confirmed, but the sandbox could not save its chain state: ${(error as Error).message}`,
          );
        })
    : async () => {};
  if (fresh) await persist();

  let lastCheck = { at: 0, connected: true };
  let checking: Promise<boolean> | undefined;
  const isConnected = async () => {
    if (Date.now() - lastCheck.at < CONNECTION_CHECK_MS) return lastCheck.connected;
    checking ??= probe
      .getBlockNumber({ cacheTime: 0 })
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

  return {
    rpcUrl,
    chainId,
    chainName,
    dev,
    publicClient,
    deployment: deployed,
    treasury,
    faucet,
    wallet,
    persist,
    syncTime,
    isConnected,
    nowSeconds: () => options.clock.nowSeconds(),
    async close() {
      // Let queued sends settle so the last snapshot includes them; with the chain already
      // gone there is nothing left to settle or save.
      if (!anvil || anvil.running()) {
        await Promise.all([...wallets.values()].map((w) => w.exclusive(async () => {})));
        await persist().catch(() => undefined);
      }
      await anvil?.stop();
    },
  };
}

async function isDevChain(testClient: ReturnType<typeof createTestClient>): Promise<boolean> {
  try {
    await testClient.request({ method: 'anvil_nodeInfo' } as never);
    return true;
  } catch (error) {
    if (isUnreachable(error)) throw error;
    return false;
  }
}

async function topUp(
  testClient: ReturnType<typeof createTestClient>,
  publicClient: PublicClient<Transport, Chain>,
  address: Address,
  value: bigint,
): Promise<void> {
  if ((await publicClient.getBalance({ address })) < value / 2n) {
    await testClient.setBalance({ address, value });
  }
}

async function hasCode(client: PublicClient<Transport, Chain>, address: Address): Promise<boolean> {
  const code = await client.getCode({ address });
  return code !== undefined && code !== '0x';
}

/** `--deployment FILE`, or the addresses this state dir deployed on an external dev chain. */
function readDeployment(options: ChainOptions, dev: boolean): Deployment | undefined {
  const path =
    options.deploymentFile ?? (dev ? join(options.stateDir, DEPLOYMENT_FILE) : undefined);
  if (!path || !existsSync(path)) {
    if (options.deploymentFile) throw new StartupError(`--deployment ${path}: no such file`);
    return undefined;
  }
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(path, 'utf8'));
  } catch {
    throw new StartupError(`${path} is not valid JSON`);
  }
  const parsed = ContractAddresses.safeParse(raw);
  if (!parsed.success) {
    throw new StartupError(`${path} is not a deployment file: ${parsed.error.issues[0]?.message}`);
  }
  return parsed.data;
}
