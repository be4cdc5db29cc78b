import { createAgentStore } from './agents.ts';
import { type Database, openDatabase, transaction } from './db.ts';
import { createFaucetStore } from './faucet.ts';
import { createMetaStore } from './meta.ts';
import { createNonceStore } from './nonces.ts';

/** The sandbox's off-chain state: one SQLite database, one repository per table group. */
export function openStore(path: string) {
  const db: Database = openDatabase(path);
  const meta = createMetaStore(db);
  return {
    meta,
    faucet: createFaucetStore(db),
    /**
     * Reserves the next HD index for an agent wallet. Committed before the wallet is
     * funded, so a crash mid-registration skips an index rather than reusing one.
     */
    allocateWalletIndex(first: number): number {
      return transaction(db, () => {
        const index = Number(meta.get('next_wallet_index') ?? first);
        meta.set('next_wallet_index', String(index + 1));
        return index;
      });
    },
    nonces: createNonceStore(db),
    agents: createAgentStore(db),
    transaction: <T>(work: () => T): T => transaction(db, work),
    close: () => db.close(),
  };
}
export type Store = ReturnType<typeof openStore>;
