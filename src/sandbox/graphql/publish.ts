import { DataApiError } from '../errors.ts';
import type { IndexReads } from '../indexer/index-reads.ts';
import type { IndexCommit } from '../indexer/indexer.ts';
import type { DataQueries } from '../indexer/queries.ts';
import type { Live } from './live.ts';
import { transactionRoot, vaultRoot } from './resolvers.ts';

/**
 * At most this many transactions wait to be read for `transactionCreated` while an earlier
 * commit's events are read (past it, the rest of a commit's are skipped, and a warning says
 * so): a bound on what commits pile up behind a slow read.
 */
export const MAX_WAITING_TRANSACTIONS = 10_000;

/**
 * Publishes the subscriptions' events from the index's commits, once each commit is on disk:
 * `vaultUpdated` on `vault:<address>` for every vault the commit changed, and
 * `transactionCreated` on `transactions:<vault>` and `transactions:*` for every transaction it
 * recorded. A payload is built once per event, only if anyone listens, and after the
 * indexer's step (it never slows a write). Answers the unsubscribe.
 *
 * What an event says is read from the index after the commit, asynchronously, one commit's
 * reads at a time and in commit order, so that each topic's events keep the order of the
 * commits. Commits made while a read runs wait as one: the vaults they changed (each
 * vaultUpdated tells the vault's state as read, the newest) and the transactions they
 * recorded, in order (at most MAX_WAITING_TRANSACTIONS).
 */
export function publishCommits(
  index: Pick<IndexReads, 'onCommit'>,
  queries: DataQueries,
  live: Live,
  log: { warn(message: string): void } = { warn() {} },
): () => void {
  let waiting: { vaults: Set<string>; transactions: IndexCommit['transactions'] } | undefined;
  let publishing = false;
  let skipped = 0;

  async function publishWaiting(): Promise<void> {
    while (waiting) {
      const next = waiting;
      waiting = undefined;
      try {
        await publish(next.vaults, next.transactions);
      } catch (error) {
        // An index that failed since its commit sends nothing: its rebuild ends with a
        // commit that says every vault changed.
        if (!(error instanceof DataApiError && error.code === 'INDEX_UNAVAILABLE')) {
          log.warn(`GraphQL events of an index commit were not sent: ${String(error)}`);
        }
      }
    }
    publishing = false;
    if (skipped > 0) {
      log.warn(
        `${skipped} transactionCreated event(s) were skipped: more than ${MAX_WAITING_TRANSACTIONS} waited behind a slow read of the index`,
      );
      skipped = 0;
    }
  }

  async function publish(
    vaults: Set<string>,
    transactions: IndexCommit['transactions'],
  ): Promise<void> {
    const listenedVaults = [...vaults].filter((vault) => live.listened(`vault:${vault}`));
    if (listenedVaults.length > 0) {
      for (const summary of await queries.summaries()) {
        const address = summary.address.toLowerCase();
        if (listenedVaults.includes(address)) {
          live.publish(`vault:${address}`, { vaultUpdated: vaultRoot(summary, queries) });
        }
      }
    }
    if (transactions.length === 0 || !live.listenedUnder('transactions:')) return;
    for (const item of await queries.transactionsAt(transactions)) {
      const payload = { transactionCreated: transactionRoot(item) };
      live.publish(`transactions:${item.vault.toLowerCase()}`, payload);
      live.publish('transactions:*', payload);
    }
  }

  return index.onCommit((changes: IndexCommit) => {
    const vaults = [...changes.vaults].filter((vault) => live.listened(`vault:${vault}`));
    const transactions = changes.transactions;
    if (vaults.length === 0 && transactions.length === 0) return;
    waiting ??= { vaults: new Set(), transactions: [] };
    for (const vault of vaults) waiting.vaults.add(vault);
    const room = MAX_WAITING_TRANSACTIONS - waiting.transactions.length;
    waiting.transactions.push(...transactions.slice(0, room));
    skipped += Math.max(0, transactions.length - room);
    if (publishing) return;
    publishing = true;
    // After the indexer's step, which calls this synchronously.
    setImmediate(() => void publishWaiting());
  });
}
