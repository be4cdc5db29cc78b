import {
  formatTransactionReceipt,
  type Hash,
  type Hex,
  type RpcTransactionReceipt,
  type TransactionReceipt,
} from 'viem';
import { createKeyedLock } from '../keyed-lock.ts';
import type { StoreRecord, StoreTx } from '../store/index.ts';
import type { LoggedBlock, RecordOutcome } from '../store/types.ts';
import { ChainUnavailableError, TransactionFailedError } from './errors.ts';
import {
  type RpcBlock,
  type RpcClient,
  type RpcResult,
  RpcUnreachableError,
  toQuantity,
} from './rpc.ts';

/** A transaction signed by one of the sandbox's wallets, ready to broadcast. */
export interface SignedTx {
  raw: Hex;
  hash: Hash;
  /** Says what the transaction does, in error messages. */
  label: string;
}

export interface BlockHead {
  number: number;
  hash: Hash;
  timestamp: number;
}

export interface Submission<T, S = unknown> {
  txs: SignedTx[];
  /**
   * Reads what the write's answer needs from the chain as the block left it (a balance, say),
   * once every transaction has succeeded and before the block is committed, so that `record`
   * can commit the answer with the write (Idempotency-Key). If it fails, nothing of the block
   * is committed and the chain is rebuilt from the log: no effect outlives its answer.
   */
  settle?: (receipts: TransactionReceipt[]) => Promise<S>;
  /**
   * Runs inside the transaction that makes the block durable, once every transaction has
   * succeeded: the write's off-chain rows (written through `tx`) and the chain log then commit
   * together.
   */
  record?: (tx: StoreTx, receipts: TransactionReceipt[], settled: S) => Promise<T>;
  /**
   * Seconds the block moves chain time on by, past the later of sandbox time and its parent's
   * time (a clock advance): the chain moves by that much even when it ran ahead of the clock.
   */
  advance?: number;
}

export interface Submitted<T> {
  receipts: TransactionReceipt[];
  recorded: T;
}

export interface TxSubmitter {
  submit<T = undefined, S = unknown>(submission: Submission<T, S>): Promise<Submitted<T>>;
}

/** The chain is no longer the one the log describes (reset, reverted, or replaced). */
export class ChainDivergedError extends Error {}

export interface BlockProducerOptions {
  rpc: RpcClient;
  head: BlockHead;
  /** Sandbox time in seconds: blocks carry it, or the parent's timestamp if that is later. */
  nowSeconds(): number;
  /**
   * Makes `blocks` durable in one transaction, running each of `records` inside it (each
   * on its own savepoint, so that one failing record loses only its own rows).
   */
  commit(blocks: LoggedBlock[], records: StoreRecord[]): Promise<RecordOutcome[]>;
  /** Resolves once what `commit` committed is on disk; writes are answered after it. */
  sync(): Promise<void>;
  /** Turns a reverted transaction into the reason it reverted. */
  revertReason(hash: Hash): Promise<string>;
  /** The chain under the producer no longer matches the log; recovery should begin. */
  onDiverged(error: Error): void;
  /** The base fee, in wei, that the producer puts back when someone raised it (see broadcast). */
  baseFee: bigint;
  /** What others did to the chain that the producer undid (a base fee raised, automine on). */
  log: { warn(message: string): void };
}

interface Pending {
  submission: Submission<unknown, unknown>;
  resolve(value: Submitted<unknown>): void;
  reject(error: unknown): void;
}

/** What anvil answers to a transaction whose fee cap is below the next block's base fee. */
const BASE_FEE_TOO_HIGH = /max fee per gas less than block base fee/i;

/** At most this many writes share a block; the rest wait for the next one. */
const MAX_WRITES_PER_BLOCK = 256;

/**
 * The sandbox's only block producer (anvil runs with --no-mining). Writes submit signed
 * transactions; the producer sends every waiting write's transactions at once, mines one block
 * at sandbox time, and commits the block to the chain log together with each successful
 * write's off-chain rows, in one store transaction. A write resolves only once that commit is
 * fsynced; the next block may be made meanwhile. Writes that arrive while a block is being
 * made share the next one (group commit).
 *
 * Every block the chain gains is logged, whatever becomes of the writes in it; blocks that
 * someone else mined over the RPC URL too, when they extend the logged chain. A chain that no
 * longer extends the log, or a block that could not be logged, is reported through
 * `onDiverged`: the chain must then be rebuilt from the log.
 */
export function createBlockProducer(options: BlockProducerOptions) {
  const { rpc } = options;
  let head = options.head;
  const queue: Pending[] = [];
  let running: Promise<void> | undefined;
  // Held while a block is made, and by whoever must see the chain stand still (checkpoints,
  // recovery).
  const gate = createKeyedLock();
  let stopped: Error | undefined;

  function submit<T, S>(submission: Submission<T, S>): Promise<Submitted<T>> {
    if (stopped) return Promise.reject(stopped);
    return new Promise((resolve, reject) => {
      queue.push({ submission, resolve, reject } as Pending);
      kick();
    });
  }

  function kick(): void {
    if (running || queue.length === 0) return;
    running = (async () => {
      while (queue.length > 0) {
        const batch = queue.splice(0, MAX_WRITES_PER_BLOCK);
        await gate('chain', () => produce(batch));
      }
    })().finally(() => {
      running = undefined;
      kick();
    });
  }

  async function produce(batch: Pending[]): Promise<void> {
    if (stopped) {
      for (const pending of batch) pending.reject(stopped);
      return;
    }
    const failed = new Map<Pending, unknown>();
    let blocks: LoggedBlock[] = [];
    let receipts = new Map<Hash, TransactionReceipt>();
    try {
      const { ours, latest } = await broadcast(batch, failed);
      const advance = Math.max(0, ...batch.map((p) => p.submission.advance ?? 0));
      const mined = await mineIncluding(ours, advance, latest);
      blocks = mined.blocks;
      for (const pending of batch) {
        const stuck = pending.submission.txs.find((tx) => mined.unmined.has(tx.hash));
        if (stuck && !failed.has(pending)) {
          failed.set(
            pending,
            new TransactionFailedError(
              stuck.label,
              'it was not mined (its nonce is out of order); retry',
            ),
          );
        }
      }
      receipts = await receiptsOf(blocks, mined.receipts);
    } catch (error) {
      // Whatever was mined is not logged: the chain is ahead of the log.
      for (const pending of batch) pending.reject(failed.get(pending) ?? asReported(error));
      options.onDiverged(error as Error);
      return;
    }

    const succeeded: Array<{ pending: Pending; receipts: TransactionReceipt[] }> = [];
    const reverted: Array<{ pending: Pending; tx: SignedTx }> = [];
    for (const pending of batch) {
      if (failed.has(pending)) continue;
      const own = pending.submission.txs.map((tx) => receipts.get(tx.hash));
      const bad = pending.submission.txs.find((_, i) => own[i]?.status !== 'success');
      if (bad) reverted.push({ pending, tx: bad });
      else succeeded.push({ pending, receipts: own as TransactionReceipt[] });
    }
    let settled: unknown[];
    try {
      settled = await Promise.all(
        succeeded.map(({ pending, receipts: own }) => pending.submission.settle?.(own)),
      );
    } catch (error) {
      // Nothing of this block is logged, so no write's effect outlives its answer.
      for (const pending of batch) pending.reject(new ChainUnavailableError());
      options.onDiverged(error as Error);
      return;
    }
    let outcomes: RecordOutcome[];
    try {
      outcomes = await options.commit(
        blocks,
        succeeded.map(
          ({ pending, receipts: own }, i) =>
            async (tx: StoreTx) =>
              pending.submission.record?.(tx, own, settled[i]),
        ),
      );
    } catch (error) {
      for (const pending of batch) pending.reject(new ChainUnavailableError());
      options.onDiverged(error as Error);
      return;
    }
    const last = blocks.at(-1);
    if (last) head = { number: last.number, hash: last.hash, timestamp: last.timestamp };

    // The next block may be made while this one's commit is fsynced; its writes are
    // answered once the fsync is done.
    const reasons = Promise.all(
      reverted.map(({ tx }) =>
        options.revertReason(tx.hash).catch(() => 'the transaction reverted'),
      ),
    );
    void options.sync().then(
      async () => {
        succeeded.forEach(({ pending, receipts: own }, i) => {
          const outcome = outcomes[i] as RecordOutcome;
          if (outcome.ok) pending.resolve({ receipts: own, recorded: outcome.value });
          else pending.reject(outcome.error);
        });
        for (const [pending, error] of failed) pending.reject(error);
        const why = await reasons;
        reverted.forEach(({ pending, tx }, i) => {
          pending.reject(new TransactionFailedError(tx.label, why[i] as string, tx.hash));
        });
      },
      (error: unknown) => {
        for (const pending of batch) pending.reject(error);
      },
    );
  }

  /**
   * Sends every write's transactions in one request and returns those the node accepted,
   * by hash, with the node's block number (asked in the same request, which saves a round
   * trip before mining). A write whose send fails is dropped whole: its later transactions
   * would otherwise land in the block without the earlier ones.
   */
  async function broadcast(batch: Pending[], failed: Map<Pending, unknown>) {
    const entries = batch.flatMap((pending) =>
      pending.submission.txs.map((tx) => ({ pending, tx })),
    );
    const results = await rpc.batch([
      ...entries.map(({ tx }) => ({ method: 'eth_sendRawTransaction', params: [tx.raw] })),
      { method: 'eth_blockNumber' },
    ]);
    const number = results[entries.length];
    const latest = number?.ok ? Number(number.value) : undefined;
    await resendUnderpriced(entries, results);
    const ours = new Map<Hash, Hex>();
    entries.forEach(({ pending, tx }, i) => {
      const result = results[i];
      if (result?.ok) ours.set(tx.hash, tx.raw);
      else if (!failed.has(pending)) {
        failed.set(pending, TransactionFailedError.from(tx.label, result?.error));
      }
    });
    const drops = [...failed.keys()].flatMap((pending) =>
      pending.submission.txs
        .filter((tx) => ours.delete(tx.hash))
        .map((tx) => ({ method: 'anvil_dropTransaction', params: [tx.hash] })),
    );
    await rpc.batch(drops);
    return { ours, latest };
  }

  /**
   * The sandbox is the chain's only block producer, so the base fee is its to set: when the
   * node refused transactions because someone raised the next block's base fee above what
   * the sandbox's writes pay (anvil_setNextBlockBaseFeePerGas over the RPC URL, or a block
   * mined at such a fee), it is put back and those transactions are sent again, once.
   * `results` is updated in place.
   */
  async function resendUnderpriced(entries: Array<{ tx: SignedTx }>, results: RpcResult[]) {
    const underpriced = entries.flatMap((_, i) => {
      const result = results[i];
      return result && !result.ok && BASE_FEE_TOO_HIGH.test(result.error.message) ? [i] : [];
    });
    if (underpriced.length === 0) return;
    await rpc.call('anvil_setNextBlockBaseFeePerGas', [toQuantity(options.baseFee)]);
    options.log.warn(
      `the next block's base fee had been raised above what the sandbox's writes pay (by someone using the RPC URL): it is set back to ${options.baseFee} wei`,
    );
    const again = await rpc.batch(
      underpriced.map((i) => ({
        method: 'eth_sendRawTransaction',
        params: [(entries[i] as { tx: SignedTx }).tx.raw],
      })),
    );
    underpriced.forEach((i, j) => {
      results[i] = again[j] as RpcResult;
    });
  }

  /**
   * Mines until every accepted transaction is in a block (a full block leaves some for the
   * next one) and returns the new blocks, after any that someone else mined since the head.
   * Transactions a block would not take (a nonce out of order) are dropped and returned.
   * `receipts` holds the receipts read together with the blocks, by block hash. The first new
   * block moves chain time on by `advance` seconds.
   */
  async function mineIncluding(ours: Map<Hash, Hex>, advance: number, latest?: number) {
    const blocks = await readFrom(head, ours, latest);
    const waiting = new Set(ours.keys());
    // Someone who mined over the RPC URL since the send may have taken ours in their block:
    // they are mined, not out of order. (A block is still made: it carries the advance.)
    for (const block of blocks) for (const hash of block.txHashes) waiting.delete(hash);
    const receipts = new Map<Hash, RpcTransactionReceipt[]>();
    for (let first = true; ; first = false) {
      const tip = blocks.at(-1) ?? head;
      // Only the first block carries the advance; a write that fills more blocks moves time once.
      const timestamp = Math.max(options.nowSeconds(), tip.timestamp) + (first ? advance : 0);
      await rpc.call('evm_mine', [{ timestamp }]);
      // The block evm_mine made is read with its receipts in one round trip; should the head
      // be anywhere but the next block (someone else mined too), every block is read again.
      const next = toQuantity(tip.number + 1);
      const [number, block, blockReceipts] = await rpc.batch([
        { method: 'eth_blockNumber' },
        { method: 'eth_getBlockByNumber', params: [next, false] },
        { method: 'eth_getBlockReceipts', params: [next] },
      ]);
      const alone =
        number?.ok && Number(number.value) === tip.number + 1 && block?.ok && block.value;
      const mined = alone
        ? await logged(tip, ours, [block])
        : await readFrom(tip, ours, number?.ok ? Number(number.value) : undefined);
      if (mined.length === 0) throw new ChainDivergedError('evm_mine mined no block');
      const only = mined[0] as LoggedBlock;
      if (alone && blockReceipts?.ok && receiptsFit(blockReceipts.value, only)) {
        receipts.set(only.hash, blockReceipts.value as RpcTransactionReceipt[]);
      }
      blocks.push(...mined);
      const before = waiting.size;
      for (const block of mined) for (const hash of block.txHashes) waiting.delete(hash);
      if (waiting.size === 0 || waiting.size === before) {
        await rpc.batch(
          [...waiting].map((hash) => ({ method: 'anvil_dropTransaction', params: [hash] })),
        );
        return { blocks, unmined: waiting, receipts };
      }
    }
  }

  /**
   * Blocks after `tip` up to the node's head (`latest`, when it was just read), checked to
   * extend it, with their raw bytes.
   */
  async function readFrom(
    tip: BlockHead,
    ours: Map<Hash, Hex>,
    latest?: number,
  ): Promise<LoggedBlock[]> {
    const newest = latest ?? Number(await rpc.call<Hex>('eth_blockNumber'));
    if (newest < tip.number) {
      throw new ChainDivergedError(
        `the chain's head went back from block ${tip.number} to block ${newest}`,
      );
    }
    if (newest === tip.number) return [];
    const numbers = Array.from({ length: newest - tip.number }, (_, i) => tip.number + 1 + i);
    const results = await rpc.batch(
      numbers.map((n) => ({ method: 'eth_getBlockByNumber', params: [toQuantity(n), false] })),
    );
    return logged(tip, ours, results);
  }

  /** The blocks eth_getBlockByNumber answered, checked to extend `tip`, with their raw bytes. */
  async function logged(
    tip: BlockHead,
    ours: Map<Hash, Hex>,
    results: Array<RpcResult | undefined>,
  ): Promise<LoggedBlock[]> {
    const blocks: LoggedBlock[] = [];
    let parent = tip.hash;
    for (const result of results) {
      const block = (result?.ok ? result.value : undefined) as RpcBlock | undefined;
      if (!block) throw new ChainDivergedError('a block vanished while it was read');
      if (block.parentHash !== parent) {
        throw new ChainDivergedError(
          `block ${Number(block.number)} does not extend the logged chain (its parent is ${block.parentHash}, the log's head ${parent})`,
        );
      }
      parent = block.hash;
      // Transactions others sent over the RPC URL: their raw bytes come from the node.
      const unknown = block.transactions.filter((hash) => !ours.has(hash));
      const fetched = await rpc.batch(
        unknown.map((hash) => ({ method: 'eth_getRawTransactionByHash', params: [hash] })),
      );
      const theirs = new Map<Hash, Hex>();
      unknown.forEach((hash, i) => {
        const raw = fetched[i];
        if (!raw?.ok || typeof raw.value !== 'string') {
          throw new ChainDivergedError(`the raw bytes of transaction ${hash} are unavailable`);
        }
        theirs.set(hash, raw.value as Hex);
      });
      blocks.push({
        number: Number(block.number),
        hash: block.hash,
        parentHash: block.parentHash,
        timestamp: Number(block.timestamp),
        txs: block.transactions.map((hash) => (ours.get(hash) ?? theirs.get(hash)) as Hex),
        txHashes: block.transactions,
      });
    }
    return blocks;
  }

  /** The receipts of every transaction in `blocks`: those in `known`, and the rest read now. */
  async function receiptsOf(
    blocks: LoggedBlock[],
    known: Map<Hash, RpcTransactionReceipt[]>,
  ): Promise<Map<Hash, TransactionReceipt>> {
    const receipts = new Map<Hash, TransactionReceipt>();
    for (const block of known.values()) {
      for (const receipt of block) {
        receipts.set(receipt.transactionHash, formatTransactionReceipt(receipt));
      }
    }
    const withTxs = blocks.filter((block) => block.txs.length > 0 && !known.has(block.hash));
    const results = await rpc.batch(
      withTxs.map((block) => ({
        method: 'eth_getBlockReceipts',
        params: [toQuantity(block.number)],
      })),
    );
    results.forEach((result, i) => {
      if (!result.ok) throw result.error;
      const block = withTxs[i] as LoggedBlock;
      // Missing or other receipts would report a mined write as reverted.
      if (!receiptsFit(result.value, block)) {
        throw new ChainDivergedError(`the receipts of block ${block.number} do not match it`);
      }
      for (const receipt of result.value as RpcTransactionReceipt[]) {
        receipts.set(receipt.transactionHash, formatTransactionReceipt(receipt));
      }
    });
    return receipts;
  }

  /**
   * Logs blocks that someone else mined over the RPC URL, and mines transactions they sent
   * there, so that every change to the chain is in the log within a poll interval; turns
   * automine off again if someone turned it on. The head is
   * compared by hash too: a chain replaced at the same height (anvil_reorg) has as many blocks
   * as the log, but not the same ones.
   */
  async function logOthersBlocks(): Promise<void> {
    const [status, latest, automine] = await rpc.batch([
      { method: 'txpool_status' },
      { method: 'eth_getBlockByNumber', params: ['latest', false] },
      { method: 'anvil_getAutomine' },
    ]);
    if (!status?.ok) throw status?.error;
    if (!latest?.ok) throw latest?.error;
    if (automine?.ok && automine.value === true) {
      // Blocks mined behind the producer's back, in the middle of its own: put it back.
      await rpc.call('anvil_setAutomine', [false]);
      options.log.warn(
        'automine was turned on over the RPC URL; it is off again: the sandbox mines the blocks',
      );
    }
    const top = latest.value as RpcBlock;
    if (Number(top.number) === head.number && top.hash !== head.hash) {
      throw new ChainDivergedError(
        `block ${head.number} is now ${top.hash}, not the logged ${head.hash} (the chain was replaced)`,
      );
    }
    const blocks =
      Number((status.value as { pending: Hex }).pending) > 0
        ? (await mineIncluding(new Map(), 0)).blocks
        : await readFrom(head, new Map(), Number(top.number));
    if (blocks.length === 0) return;
    await options.commit(blocks, []);
    await options.sync();
    const last = blocks.at(-1) as LoggedBlock;
    head = { number: last.number, hash: last.hash, timestamp: last.timestamp };
  }

  return {
    submit,
    head: () => head,
    /** Runs `work` while no block is being made, after the blocks already under way. */
    exclusive<T>(work: () => Promise<T>): Promise<T> {
      return gate('chain', work);
    },
    /**
     * Logs blocks that someone else mined over the RPC URL, and mines transactions they sent
     * there, so that every change to the chain is in the log within a poll interval.
     */
    async poll(): Promise<void> {
      if (stopped || running) return;
      await gate('chain', async () => {
        try {
          await logOthersBlocks();
        } catch (error) {
          if (!(error instanceof RpcUnreachableError)) options.onDiverged(error as Error);
        }
      });
    },
    /**
     * What poll() does, for whoever already holds exclusive(): logs the blocks others mined
     * and mines what they sent. Throws ChainDivergedError when the chain no longer extends
     * the log.
     */
    logOthersBlocks,
    /** Continues from a rebuilt chain whose head is `newHead`. Call inside exclusive(). */
    setHead(newHead: BlockHead): void {
      head = newHead;
    },
    /** Refuses every write from now on (shutdown). */
    stop(reason: Error): void {
      stopped = reason;
    },
  };
}

export type BlockProducer = ReturnType<typeof createBlockProducer>;

/** What a client is told when block production fails for reasons not its own. */
function asReported(error: unknown): unknown {
  if (error instanceof ChainDivergedError || error instanceof RpcUnreachableError) {
    return new ChainUnavailableError();
  }
  return error;
}

/** Whether `value` is every receipt of `block`, in order (not those of a block that replaced it). */
function receiptsFit(value: unknown, block: LoggedBlock): boolean {
  return (
    Array.isArray(value) &&
    value.length === block.txHashes.length &&
    value.every(
      (receipt: RpcTransactionReceipt, i) =>
        receipt?.blockHash === block.hash && receipt.transactionHash === block.txHashes[i],
    )
  );
}
