import { createAgentStore } from './agents.ts';
import { type Database, openDatabase, transaction } from './db.ts';
import { createMetaStore } from './meta.ts';
import { createNonceStore } from './nonces.ts';

/** The sandbox's off-chain state: one SQLite database, one repository per table group. */
export function openStore(path: string) {
  const db: Database = openDatabase(path);
  return {
    meta: createMetaStore(db),
    nonces: createNonceStore(db),
    agents: createAgentStore(db),
    transaction: <T>(work: () => T): T => transaction(db, work),
    close: () => db.close(),
  };
}
export type Store = ReturnType<typeof openStore>;
