import type { LoggedBlock, RecordOutcome } from '../chain/producer.ts';
import { createAgentStore } from './agents.ts';
import { createChainLogStore } from './chain-log.ts';
import { type Database, durableTransaction, openDatabase, savepoint, transaction } from './db.ts';
import { createFaucetStore } from './faucet.ts';
import { createMetaStore } from './meta.ts';
import { createNonceStore } from './nonces.ts';

/** HD index of the first agent wallet (m/44'/60'/0'/0/1000); lower ones are the sandbox's own. */
export const FIRST_AGENT_WALLET_INDEX = 1000;

/** The sandbox's off-chain state: one SQLite database, one repository per table group. */
export function openStore(path: string, options: { durable?: boolean } = {}) {
  const db: Database = openDatabase(path, options);
  const meta = createMetaStore(db);
  const chainLog = createChainLogStore(db);
  const nextWalletIndex = () => Number(meta.get('next_wallet_index') ?? FIRST_AGENT_WALLET_INDEX);
  return {
    meta,
    faucet: createFaucetStore(db),
    chainLog,
    /**
     * Takes the next HD index for an agent wallet (call inside a transaction). Committed
     * before the wallet is funded, so a crash mid-registration skips an index rather than
     * reusing one.
     */
    takeWalletIndex(): number {
      const index = nextWalletIndex();
      meta.set('next_wallet_index', String(index + 1));
      return index;
    },
    /** The lowest HD index no agent has been given yet. */
    nextWalletIndex,
    nonces: createNonceStore(db),
    agents: createAgentStore(db),
    transaction: <T>(work: () => T): T => transaction(db, work),
    /**
     * Appends `blocks` to the chain log and runs each record on its own savepoint, all in one
     * fsynced transaction: a write's off-chain rows are durable exactly when its blocks are.
     */
    commitBlocks(blocks: LoggedBlock[], records: Array<() => unknown>): RecordOutcome[] {
      return durableTransaction(db, () => {
        chainLog.append(blocks);
        return records.map((record) => savepoint(db, record));
      });
    },
    close: () => db.close(),
  };
}
export type Store = ReturnType<typeof openStore>;
