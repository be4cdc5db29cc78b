import { DataApiError } from '../errors.ts';
import type { IndexReads } from '../indexer/index-reads.ts';
import type { IndexCommit } from '../indexer/indexer.ts';
import type { DataQueries } from '../indexer/queries.ts';
import type { Live } from './live.ts';
import { transactionRoot, vaultRoot } from './resolvers.ts';

/**
 * Publishes the subscriptions' events from the index's commits, once each commit is on disk:
 * `vaultUpdated` on `vault:<address>` for every vault the commit changed, and
 * `transactionCreated` on `transactions:<vault>` and `transactions:*` for every transaction it
 * recorded. A payload is built once per event, only if anyone listens, and after the
 * indexer's step (it never slows a write). Answers the unsubscribe.
 */
export function publishCommits(
  index: Pick<IndexReads, 'onCommit'>,
  queries: DataQueries,
  live: Live,
): () => void {
  return index.onCommit((changes: IndexCommit) => {
    const vaults = [...changes.vaults].filter((vault) => live.listened(`vault:${vault}`));
    const transactions = changes.transactions;
    if (vaults.length === 0 && transactions.length === 0) return;
    setImmediate(
      unlessIndexUnavailable(() => {
        if (vaults.length > 0) {
          for (const summary of queries.summaries()) {
            const topic = `vault:${summary.address.toLowerCase()}`;
            if (vaults.includes(summary.address.toLowerCase())) {
              live.publish(topic, { vaultUpdated: vaultRoot(summary, queries) });
            }
          }
        }
        if (transactions.length === 0 || !live.listenedUnder('transactions:')) return;
        for (const item of queries.transactionsAt(transactions)) {
          const payload = { transactionCreated: transactionRoot(item) };
          live.publish(`transactions:${item.vault.toLowerCase()}`, payload);
          live.publish('transactions:*', payload);
        }
      }),
    );
  });
}

/**
 * `publish`, except that an index that failed since its commit sends nothing (rather than
 * throwing out of setImmediate): its rebuild ends with a commit that says every vault changed.
 */
function unlessIndexUnavailable(publish: () => void): () => void {
  return () => {
    try {
      publish();
    } catch (error) {
      if (!(error instanceof DataApiError && error.code === 'INDEX_UNAVAILABLE')) throw error;
    }
  };
}
