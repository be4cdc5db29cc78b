import {
  type Address,
  encodeFunctionData,
  getAddress,
  type Hash,
  type Hex,
  parseAbi,
  toEventSelector,
} from 'viem';
import { VAULT_IDS } from '../../api/schemas/values.ts';
import { type Deployment, VAULT_CONFIG } from '../chain/deployment.ts';
import { type RpcBlock, type RpcClient, type RpcResult, toQuantity } from '../chain/rpc.ts';
import { createLogSource } from './log-source.ts';
import {
  type FailedCall,
  GOVERNOR_TOPICS,
  PASS_TOPICS,
  type RawLog,
  STRATEGY_SUBMITTED_TOPIC,
  type VaultState,
  WATCHED_EVENTS_ABI,
} from './projection.ts';

/**
 * The index's sync source: what it reads from the chain, over RPC. Blocks' headers, and their
 * events (from receipts on a dev chain, which also show reverted calls; from eth_getLogs in
 * ranges the provider takes elsewhere), the head, and the vaults' state at a block. It keeps
 * nothing: what is read goes to the raw store (raw-store.ts).
 */

/** At most this many blocks are read and committed at once. */
export const MAX_BLOCKS_PER_STEP = 500;

/** topic0 of every event the derived tables are built from. */
const TOPICS: Hex[] = [
  ...new Set(
    WATCHED_EVENTS_ABI.filter((item) => item.type === 'event').map((item) => toEventSelector(item)),
  ),
];
const TRANSFER_TOPIC = toEventSelector('Transfer(address,address,uint256)');
export type VaultId = (typeof VAULT_IDS)[number];

/** Each vault's state as the chain held it after one block (see observe). */
export interface ChainObservation {
  block: { number: number; hash: Hash };
  states: Map<string, VaultState>;
  /** Some accounts' ETH then (indexer.ts observe: a bounded number at a time, in turn). */
  accounts?: Map<string, bigint>;
}

interface RpcReceipt {
  blockHash: Hash;
  transactionHash: Hash;
  transactionIndex: Hex;
  status: Hex;
  from: Address;
  to: Address | null;
  logs: RpcLog[];
}

interface RpcLog {
  address: Address;
  topics: Hex[];
  data: Hex;
  blockNumber: Hex;
  blockHash: Hash;
  transactionHash: Hash;
  transactionIndex: Hex;
  logIndex: Hex;
  removed?: boolean;
}

export interface Header {
  number: number;
  hash: Hash;
  parentHash: Hash;
  timestamp: number;
  transactionCount: number;
  /** Each transaction's input, by index (on a dev chain, where blocks are read whole). */
  inputs?: Hex[];
  /**
   * The accounts that sent or received a transaction in the block (on a dev chain, where
   * blocks are read whole): their ETH moved (gas, value), which no event tells of.
   */
  accounts?: string[];
}

/** A log as the raw store keeps it, with its transaction's index. */
export type SourcedLog = RawLog & { txIndex: number };

/** The watched events and reverted vault calls of a range of blocks, by block number. */
export interface BlockEvents {
  logs: Map<number, SourcedLog[]>;
  failed: Map<number, FailedCall[]>;
}

export function createChainSource(options: {
  rpc: RpcClient;
  deployment: Deployment;
  /** On a dev chain (finality 0) blocks are read whole and events come from receipts. */
  fromReceipts: boolean;
  /** True once the index is closed: eth_getLogs stops trying. */
  stopped: () => boolean;
}) {
  const { rpc, deployment, fromReceipts } = options;
  const vaults = new Map<string, VaultId>(
    VAULT_IDS.map((id) => [deployment.vaults[id].toLowerCase(), id]),
  );
  const usdc = deployment.usdc.toLowerCase();
  const registry = deployment.strategy_registry.toLowerCase();
  const governor = deployment.governor.toLowerCase();
  const agentPass = deployment.agent_pass.toLowerCase();
  const protocolToken = deployment.protocol_token.toLowerCase();
  /** The contracts that name the index (its identity), as before the token was read. */
  const watched = [...vaults.keys(), usdc, registry, governor, agentPass] as Address[];
  /** The contracts whose logs are read: the protocol token's too (its balances). */
  const logAddresses = [...watched, protocolToken] as Address[];

  /** The chain's head block: its number and hash. */
  async function latestHead(): Promise<{ number: number; hash: Hash }> {
    const block = await rpc.call<RpcBlock>('eth_getBlockByNumber', ['latest', false]);
    return { number: Number(block.number), hash: block.hash };
  }

  const headerCalls = (from: number, to: number, whole = false) =>
    range(from, to).map((n) => ({
      method: 'eth_getBlockByNumber',
      params: [toQuantity(n), whole],
    }));

  async function headers(from: number, to: number): Promise<Header[]> {
    return headersFrom(from, await rpc.batch(headerCalls(from, to)));
  }

  function headersFrom(from: number, results: RpcResult[]): Header[] {
    return results.map((result, i) => {
      const block = (result.ok ? result.value : undefined) as RpcBlock | undefined;
      if (!block) throw new Error(`block ${from + i} is not available`);
      const txs = block.transactions as Array<
        Hash | { input: Hex; from: Address; to: Address | null }
      >;
      const accounts = new Set<string>();
      for (const tx of txs) {
        if (typeof tx === 'string') continue;
        accounts.add(tx.from.toLowerCase());
        if (tx.to) accounts.add(tx.to.toLowerCase());
      }
      return {
        number: Number(block.number),
        hash: block.hash,
        parentHash: block.parentHash,
        timestamp: Number(block.timestamp),
        transactionCount: txs.length,
        inputs: txs.map((tx) => (typeof tx === 'string' ? '0x' : tx.input)),
        accounts: [...accounts],
      };
    });
  }

  const receiptCalls = (from: number, to: number) =>
    range(from, to).map((n) => ({ method: 'eth_getBlockReceipts', params: [toQuantity(n)] }));

  /** Whether a log is one the derived tables are built from. */
  function isWatched(log: RpcLog): boolean {
    const address = log.address.toLowerCase();
    // Every transfer of the asset (the vaults' balances, and every account's) and of the
    // protocol token (accounts' balances); not their approvals.
    if (address === usdc || address === protocolToken) return log.topics[0] === TRANSFER_TOPIC;
    const topic = log.topics[0] as Hex;
    if (address === governor) return GOVERNOR_TOPICS.includes(topic);
    if (address === agentPass) return PASS_TOPICS.includes(topic);
    return (vaults.has(address) || address === registry) && TOPICS.includes(topic);
  }

  /**
   * The watched events and the reverted vault calls of each block, from its receipts;
   * undefined when a block's receipts are not all there yet (anvil answers a new block's header
   * a moment before its receipts and logs, and eth_getLogs then answers nothing for it, which
   * could not be told from no events).
   */
  function eventsFrom(
    blocks: Header[],
    results: RpcResult[],
  ): { logs: RpcLog[]; failed: Map<number, FailedCall[]> } | undefined {
    const logs: RpcLog[] = [];
    const failed = new Map<number, FailedCall[]>();
    for (const [i, block] of blocks.entries()) {
      const result = results[i];
      const receipts = (result?.ok ? result.value : undefined) as RpcReceipt[] | null | undefined;
      if (!receipts || receipts.length !== block.transactionCount) return undefined;
      for (const receipt of receipts) {
        if (receipt.blockHash !== block.hash) return undefined;
        for (const log of receipt.logs) if (isWatched(log)) logs.push(log);
        const to = receipt.to?.toLowerCase();
        if (Number(receipt.status) === 0 && to && vaults.has(to)) {
          const txIndex = Number(receipt.transactionIndex);
          const calls = failed.get(block.number) ?? [];
          calls.push({
            txIndex,
            txHash: receipt.transactionHash,
            from: receipt.from,
            to,
            input: block.inputs?.[txIndex] ?? '0x',
          });
          failed.set(block.number, calls);
        }
      }
    }
    return { logs, failed };
  }

  const logsCall = (from: number, to: number) => ({
    method: 'eth_getLogs',
    params: [
      {
        fromBlock: toQuantity(from),
        toBlock: toQuantity(to),
        address: logAddresses,
        // The events the derived tables are built from; the rest stays on the chain.
        topics: [TOPICS],
      },
    ],
  });

  /**
   * eth_getLogs in ranges the provider takes: a refused range shrinks, a node that is down or
   * busy is tried again at the same size, and the size grows back (see log-source.ts).
   */
  const logSource = createLogSource<RpcLog>({
    fetch: (from, to) => {
      const call = logsCall(from, to);
      return rpc.call<RpcLog[]>(call.method, call.params);
    },
    maxBlocks: MAX_BLOCKS_PER_STEP,
    stopped: options.stopped,
  });

  /**
   * Blocks `from` to `to` and, in the same round trip where it can, their events: writes wait
   * for it. On a dev chain the events come from the blocks' receipts, which can be checked to
   * be complete and also show reverted calls; elsewhere from eth_getLogs, over blocks past the
   * finality depth. No state is read: the chain keeps none for old blocks (anvil prunes it, a
   * restored chain starts at its checkpoint), so everything is derived from events.
   *
   * The headers come first, for the caller to check that they follow what it holds; only then
   * does it ask for `events()`, which reads what did not come along (logs in as many calls as
   * the provider needs) and answers undefined when the blocks must be read again (receipts not
   * all there yet, a log of another block than the one read).
   */
  async function readBlocks(
    from: number,
    to: number,
  ): Promise<{ blocks: Header[]; events(): Promise<BlockEvents | undefined> }> {
    const headerCount = to - from + 1;
    // The logs ride along with the headers when the provider takes the whole range at once;
    // otherwise they are read after, in as many calls as it needs.
    const logsAlong = !fromReceipts && headerCount <= logSource.blocksPerCall();
    const eventCalls = fromReceipts
      ? receiptCalls(from, to)
      : logsAlong
        ? [logsCall(from, to)]
        : [];
    const results = await rpc.batch([...headerCalls(from, to, fromReceipts), ...eventCalls]);
    const blocks = headersFrom(from, results.slice(0, headerCount));
    const events = async (): Promise<BlockEvents | undefined> => {
      const eventResults = results.slice(headerCount);
      let found: RpcLog[];
      let failed = new Map<number, FailedCall[]>();
      if (fromReceipts) {
        const fromBlocks = eventsFrom(blocks, eventResults);
        if (!fromBlocks) return undefined;
        found = fromBlocks.logs;
        failed = fromBlocks.failed;
      } else {
        const logsResult = eventResults[0];
        let all: RpcLog[];
        if (logsResult?.ok) {
          logSource.succeeded();
          all = logsResult.value as RpcLog[];
        } else {
          // A refused range shrinks before the range is read again in smaller calls.
          if (logsResult) logSource.failed(logsResult.error, headerCount);
          all = await logSource.read(from, to);
        }
        found = all.filter(isWatched);
      }
      const logs = found.filter((log) => !log.removed);
      const hashes = new Map(blocks.map((block) => [block.number, block.hash]));
      if (logs.some((log) => hashes.get(Number(log.blockNumber)) !== log.blockHash)) {
        return undefined;
      }
      const inputs = await submissionInputs(blocks, logs);
      const logsOf = new Map<number, SourcedLog[]>();
      for (const log of logs) {
        const n = Number(log.blockNumber);
        const list = logsOf.get(n) ?? [];
        const input = inputs.get(log.transactionHash);
        list.push({
          address: log.address.toLowerCase(),
          topics: log.topics,
          data: log.data,
          logIndex: Number(log.logIndex),
          txHash: log.transactionHash,
          txIndex: Number(log.transactionIndex),
          ...(input !== undefined && { input }),
        });
        logsOf.set(n, list);
      }
      return { logs: logsOf, failed };
    };
    return { blocks, events };
  }

  /**
   * The inputs of the transactions that submitted a strategy, by hash: its description is in
   * the submit() call, not in StrategySubmitted. From the blocks read whole on a dev chain;
   * elsewhere read by hash (submissions are few).
   */
  async function submissionInputs(blocks: Header[], logs: RpcLog[]): Promise<Map<Hash, Hex>> {
    const submissions = logs.filter(
      (log) => log.address.toLowerCase() === registry && log.topics[0] === STRATEGY_SUBMITTED_TOPIC,
    );
    const inputs = new Map<Hash, Hex>();
    const byNumber = new Map(blocks.map((block) => [block.number, block]));
    const missing: RpcLog[] = [];
    for (const log of submissions) {
      const input = byNumber.get(Number(log.blockNumber))?.inputs?.[Number(log.transactionIndex)];
      if (input !== undefined && input !== '0x') inputs.set(log.transactionHash, input);
      else missing.push(log);
    }
    if (missing.length === 0) return inputs;
    const results = await rpc.batch(
      missing.map((log) => ({ method: 'eth_getTransactionByHash', params: [log.transactionHash] })),
    );
    for (const [i, log] of missing.entries()) {
      const result = results[i];
      const tx = (result?.ok ? result.value : undefined) as { input?: Hex } | null | undefined;
      if (!tx?.input) throw new Error(`transaction ${log.transactionHash} is not available`);
      inputs.set(log.transactionHash, tx.input);
    }
    return inputs;
  }

  /** The transactions' hashes of each of these blocks (by number). */
  async function transactionsOf(numbers: number[]): Promise<Map<number, Set<Hash>>> {
    const blocks = await rpc.batch(
      numbers.map((n) => ({ method: 'eth_getBlockByNumber', params: [toQuantity(n), false] })),
    );
    return new Map(
      numbers.map((n, i) => {
        const block = blocks[i];
        if (!block?.ok) throw block?.error ?? new Error(`block ${n} is not available`);
        return [n, new Set(((block.value as RpcBlock | null)?.transactions ?? []) as Hash[])];
      }),
    );
  }

  /**
   * Each vault's state on the chain at block `at`. Read it where no block is being made (the
   * checkpoint's exclusive section): anvil answers a read at its head's hash from the state of
   * the block it is mining meanwhile, not from the head's.
   */
  async function observe(at: { number: number; hash: Hash }): Promise<ChainObservation> {
    const blockTag = { blockHash: at.hash };
    // A synchronous vault holds nothing for others: it has no reservedAssets() to read.
    const reads = [...vaults].map(([vault, id]) => ({
      vault,
      calls: [
        readCall(usdc, 'balanceOf', [vault]),
        readCall(vault, 'totalSupply'),
        readCall(vault, 'apyBps'),
        readCall(vault, 'lastAccrual'),
        ...(VAULT_CONFIG[id].async ? [readCall(vault, 'reservedAssets')] : []),
      ],
    }));
    const results = await rpc.batch(
      reads.flatMap(({ calls }) =>
        calls.map((data) => ({ method: 'eth_call', params: [data, blockTag] })),
      ),
    );
    const states = new Map<string, VaultState>();
    let next = 0;
    for (const { vault, calls } of reads) {
      const values = calls.map(() => {
        const result = results[next++];
        if (!result?.ok) {
          throw new Error(
            `reading vault ${checksummed(vault)} at block ${at.number} failed: ${result?.error.message}`,
          );
        }
        return BigInt(result.value as Hex);
      });
      const [balance, totalSupply, apyBps, lastAccrual, reserved = 0n] = values as [
        bigint,
        bigint,
        bigint,
        bigint,
        bigint?,
      ];
      states.set(vault, { balance, reserved, totalSupply, apyBps, lastAccrual });
    }
    return { block: { number: at.number, hash: at.hash }, states };
  }

  /**
   * The ETH of each account named, after each block named: eth_getBalance at the block's hash,
   * all in one batch. A block whose state the chain no longer keeps (anvil keeps the last few;
   * a chain restored from a checkpoint has none before it: an index rebuilt from the start
   * reads such blocks) answers the account's balance at the chain's head instead, which is
   * what the index converges to once it gets there.
   */
  async function balancesAt(
    reads: Array<{ block: { number: number; hash: Hash }; accounts: string[] }>,
  ): Promise<Map<number, Map<string, bigint>>> {
    const calls = reads.flatMap(({ block, accounts }) =>
      accounts.map((account) => ({ block, account })),
    );
    const answered = new Map<number, Map<string, bigint>>();
    if (calls.length === 0) return answered;
    const results = await rpc.batch(
      calls.map(({ block, account }) => ({
        method: 'eth_getBalance',
        params: [account, { blockHash: block.hash }],
      })),
    );
    const gone: typeof calls = [];
    const set = (number: number, account: string, value: Hex) => {
      let balances = answered.get(number);
      if (!balances) {
        balances = new Map();
        answered.set(number, balances);
      }
      balances.set(account, BigInt(value));
    };
    for (const [i, call] of calls.entries()) {
      const result = results[i];
      if (result?.ok) set(call.block.number, call.account, result.value as Hex);
      else gone.push(call);
    }
    if (gone.length === 0) return answered;
    const latest = await rpc.batch(
      gone.map(({ account }) => ({ method: 'eth_getBalance', params: [account, 'latest'] })),
    );
    for (const [i, call] of gone.entries()) {
      const result = latest[i];
      if (!result?.ok) {
        throw new Error(
          `reading the ETH of ${checksummed(call.account)} at block ${call.block.number} failed: ${result?.error.message}`,
        );
      }
      set(call.block.number, call.account, result.value as Hex);
    }
    return answered;
  }

  return {
    /** The vaults by lower-case address. */
    vaults,
    usdc,
    registry,
    governor,
    agentPass,
    protocolToken,
    /** The contracts that name the index (its identity). */
    watched,
    balancesAt,
    latestHead,
    headers,
    readBlocks,
    transactionsOf,
    observe,
  };
}
export type ChainSource = ReturnType<typeof createChainSource>;

/** An eth_call's transaction object for a view of the sandbox's contracts, without arguments or with addresses. */
function readCall(to: string, functionName: string, args: string[] = []) {
  return {
    to,
    data: encodeFunctionData({
      abi: VIEWS_ABI,
      functionName,
      args,
    } as Parameters<typeof encodeFunctionData>[0]),
  };
}

/** The views a vault's state is read back with (SandboxVault's, ConfigurableVault's, MockUSDC's). */
const VIEWS_ABI = parseAbi([
  'function balanceOf(address) view returns (uint256)',
  'function reservedAssets() view returns (uint256)',
  'function totalSupply() view returns (uint256)',
  'function apyBps() view returns (uint256)',
  'function lastAccrual() view returns (uint256)',
]);

function range(from: number, to: number): number[] {
  return Array.from({ length: to - from + 1 }, (_, i) => from + i);
}

/** A vault's address in its EIP-55 form, as the API answers it. */
export function checksummed(address: string): Address {
  return getAddress(address);
}
