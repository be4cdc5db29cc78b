import { closeSync, existsSync, openSync, rmSync } from 'node:fs';
import { DatabaseSync } from 'node:sqlite';
import { pageDamage } from '../store/db.ts';
import { isIndexFileFailure } from './failure.ts';

/**
 * index.db: the read model of the data API (/v1, and GraphQL after it), derived from the
 * chain alone. Nothing in it is the only copy of anything: a file that is missing, damaged, of
 * another format or of another chain is deleted and rebuilt from the chain.
 *
 * These are index.db's tables; schema-postgres.ts holds the same tables on PostgreSQL, and the
 * statements that read and write them run on both: integers are BIGINT, uint256 amounts are
 * decimal TEXT here (NUMERIC(78, 0) there, both read as decimal strings) summed in JavaScript,
 * and upserts use ON CONFLICT. A change of these tables is a change of both files.
 *
 * Raw logs, keyed by (block number, log index) with their block hash and transaction index,
 * and the vault states read from the chain where they differed from the logs
 * (`vault_corrections`), are kept apart from the tables derived from them, as Ponder keeps its raw sync data apart
 * from the user's tables; `blocks` holds each indexed block's hash, and its last row is the
 * checkpoint a new block's parentHash is compared with.
 */
export const INDEX_FORMAT = '6';

const SCHEMA = `
CREATE TABLE IF NOT EXISTS index_meta (
  key TEXT PRIMARY KEY,
  value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS blocks (
  number BIGINT PRIMARY KEY,
  hash TEXT NOT NULL,
  parent_hash TEXT NOT NULL,
  timestamp BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS logs (
  block_number BIGINT NOT NULL,
  log_index INTEGER NOT NULL,
  block_hash TEXT NOT NULL,
  tx_index INTEGER NOT NULL,
  tx_hash TEXT NOT NULL,
  address TEXT NOT NULL,
  topic0 TEXT,
  topic1 TEXT,
  topic2 TEXT,
  topic3 TEXT,
  data TEXT NOT NULL,
  -- The input of the log's transaction, kept for the logs whose derived rows need it (a
  -- strategy's description is in its submit() call, not in StrategySubmitted); else NULL.
  tx_input TEXT,
  PRIMARY KEY (block_number, log_index)
);
CREATE TABLE IF NOT EXISTS failed_calls (
  block_number BIGINT NOT NULL,
  tx_index INTEGER NOT NULL,
  tx_hash TEXT NOT NULL,
  from_address TEXT NOT NULL,
  to_address TEXT NOT NULL,
  input TEXT NOT NULL,
  PRIMARY KEY (block_number, tx_index)
);
-- What the chain held for a vault where that differed from what its events add up to (a change
-- made outside transactions: anvil_setStorageAt over the RPC URL), read at a checkpoint
-- (indexer.ts reconcile). Raw data as logs are: applied after its block's logs.
CREATE TABLE IF NOT EXISTS vault_corrections (
  block_number BIGINT NOT NULL,
  vault TEXT NOT NULL,
  balance TEXT NOT NULL,
  reserved TEXT NOT NULL,
  total_supply TEXT NOT NULL,
  apy_bps BIGINT NOT NULL,
  last_accrual BIGINT NOT NULL,
  PRIMARY KEY (block_number, vault)
);
CREATE TABLE IF NOT EXISTS vaults (
  address TEXT PRIMARY KEY,
  created_block BIGINT NOT NULL,
  created_at BIGINT NOT NULL,
  fulfillment_delay BIGINT
);
CREATE TABLE IF NOT EXISTS vault_states (
  vault TEXT NOT NULL,
  block_number BIGINT NOT NULL,
  timestamp BIGINT NOT NULL,
  balance TEXT NOT NULL,
  reserved TEXT NOT NULL,
  total_supply TEXT NOT NULL,
  apy_bps BIGINT NOT NULL,
  last_accrual BIGINT NOT NULL,
  PRIMARY KEY (vault, block_number)
);
-- A vault's state at a time is one index probe (reads.ts vaultStateAt); the index this
-- replaces ended at timestamp, so that read sorted every earlier state of the vault.
DROP INDEX IF EXISTS vault_states_by_time;
CREATE INDEX IF NOT EXISTS vault_states_by_vault_time
  ON vault_states (vault, timestamp, block_number);
CREATE TABLE IF NOT EXISTS transactions (
  block_number BIGINT NOT NULL,
  log_index INTEGER NOT NULL,
  hash TEXT NOT NULL,
  type TEXT NOT NULL,
  vault TEXT NOT NULL,
  user_address TEXT NOT NULL,
  amount TEXT NOT NULL,
  shares TEXT,
  status TEXT NOT NULL,
  timestamp BIGINT NOT NULL,
  request_id TEXT,
  PRIMARY KEY (block_number, log_index)
);
CREATE INDEX IF NOT EXISTS transactions_by_user
  ON transactions (user_address, block_number DESC, log_index DESC);
CREATE INDEX IF NOT EXISTS transactions_by_request ON transactions (vault, request_id);
CREATE INDEX IF NOT EXISTS transactions_by_status ON transactions (status, type);
CREATE INDEX IF NOT EXISTS transactions_by_time ON transactions (timestamp);
-- The fulfiller's look for due ERC-7540 requests (operator/fulfilment.ts): pending ones only, by
-- the time they were made, so its cost does not grow with the requests fulfilled before.
CREATE INDEX IF NOT EXISTS requests_pending_by_time
  ON transactions (vault, timestamp, block_number, log_index) WHERE status = 'pending';
CREATE TABLE IF NOT EXISTS positions (
  user_address TEXT NOT NULL,
  vault TEXT NOT NULL,
  shares TEXT NOT NULL,
  net_deposited TEXT NOT NULL,
  deposited_at BIGINT,
  pending_deposit TEXT NOT NULL,
  claimable_deposit TEXT NOT NULL,
  pending_redeem TEXT NOT NULL,
  claimable_redeem TEXT NOT NULL,
  PRIMARY KEY (user_address, vault)
);
CREATE INDEX IF NOT EXISTS positions_claimable ON positions (vault)
  WHERE claimable_deposit <> '0' OR claimable_redeem <> '0';
CREATE TABLE IF NOT EXISTS strategies (
  id TEXT PRIMARY KEY,
  owner TEXT NOT NULL,
  name TEXT NOT NULL,
  status TEXT NOT NULL,
  created_at BIGINT NOT NULL,
  status_changed_at BIGINT NOT NULL,
  paper_trading_at BIGINT,
  description TEXT NOT NULL,
  created_block BIGINT NOT NULL,
  created_log INTEGER NOT NULL
);
-- An owner's strategies in the registry's order (strategiesOf): the order they were submitted.
CREATE INDEX IF NOT EXISTS strategies_by_owner ON strategies (owner, created_block, created_log);
-- The governor's proposals with their tallies (ProposalCreated, VoteCast), and each vote.
CREATE TABLE IF NOT EXISTS proposals (
  id BIGINT PRIMARY KEY,
  proposer TEXT NOT NULL,
  title TEXT NOT NULL,
  description TEXT NOT NULL,
  vote_start BIGINT NOT NULL,
  vote_end BIGINT NOT NULL,
  for_votes BIGINT NOT NULL,
  against_votes BIGINT NOT NULL,
  abstain_votes BIGINT NOT NULL
);
CREATE INDEX IF NOT EXISTS proposals_by_end ON proposals (vote_end);
CREATE TABLE IF NOT EXISTS votes (
  proposal_id BIGINT NOT NULL,
  voter TEXT NOT NULL,
  support INTEGER NOT NULL,
  block_number BIGINT NOT NULL,
  log_index INTEGER NOT NULL,
  PRIMARY KEY (proposal_id, voter)
);
CREATE INDEX IF NOT EXISTS votes_by_voter ON votes (voter);
-- AgentPass holdings (its Transfer events): each token's owner, and its index among the
-- owner's tokens as ERC721Enumerable keeps it (tokenOfOwnerByIndex: appended on receipt, the
-- owner's last token moved into the place of one that leaves).
CREATE TABLE IF NOT EXISTS agent_passes (
  token_id BIGINT PRIMARY KEY,
  owner TEXT NOT NULL,
  owner_index BIGINT NOT NULL
);
CREATE INDEX IF NOT EXISTS agent_passes_by_owner ON agent_passes (owner, owner_index);
-- Accounts' ETH, as eth_getBalance answered it after a block that touched them (sent or received
-- a transaction, or a watched token: source.ts balanceReads), and as a checkpoint observed it
-- where that differed (anvil_setBalance). Raw data, as logs are (no event tells of gas or plain
-- transfers): cut back by block on a reorg. A read takes the last row at or below the head.
CREATE TABLE IF NOT EXISTS eth_balances (
  address TEXT NOT NULL,
  block_number BIGINT NOT NULL,
  balance TEXT NOT NULL,
  PRIMARY KEY (address, block_number)
);
-- Each account's balance of USDC and of the protocol token (AGNT), from their Transfer events.
CREATE TABLE IF NOT EXISTS token_balances (
  token TEXT NOT NULL,
  address TEXT NOT NULL,
  balance TEXT NOT NULL,
  PRIMARY KEY (token, address)
);
`;

/**
 * The tables derived from `logs`, `failed_calls` and `vault_corrections` (the raw data). A reorg cuts the raw
 * data back and derives these again from what remains: a request's status and a strategy's
 * change in place, so they cannot be cut back by block.
 */
export const DERIVED_TABLES = [
  'vaults',
  'vault_states',
  'transactions',
  'positions',
  'strategies',
  'proposals',
  'votes',
  'agent_passes',
  'token_balances',
] as const;

/**
 * Opens index.db for the chain `identity` names (its id and the deployment's addresses),
 * starting over when the file is unreadable, damaged (its pages are checked, as sandbox.db's
 * are), of another format, or of another chain. A damaged file is reported through `warn`.
 */
export function openIndexDatabase(
  path: string,
  identity: string,
  warn: (message: string) => void = () => {},
): DatabaseSync {
  for (let attempt = 0; ; attempt++) {
    let db: DatabaseSync | undefined;
    try {
      closeSync(openSync(path, 'a', 0o600));
      db = new DatabaseSync(path);
      // Derived data: a commit lost to a crash is indexed again from the chain.
      db.exec('PRAGMA journal_mode = WAL; PRAGMA synchronous = OFF; PRAGMA busy_timeout = 5000;');
      const damage = pageDamage(db);
      if (damage) throw new DamagedIndexError(damage);
      db.exec(SCHEMA);
      const meta = (key: string) =>
        (
          db?.prepare('SELECT value FROM index_meta WHERE key = ?').get(key) as
            | { value: string }
            | undefined
        )?.value;
      const format = meta('format');
      const chain = meta('chain');
      if (format === undefined && chain === undefined) {
        const set = db.prepare(
          'INSERT INTO index_meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value',
        );
        set.run('format', INDEX_FORMAT);
        set.run('chain', identity);
        return db;
      }
      if (format === INDEX_FORMAT && chain === identity) return db;
      throw new Error('index.db was built for another format or chain');
    } catch (error) {
      try {
        db?.close();
      } catch {
        // Closing what failed is best effort.
      }
      if (attempt > 0) throw error;
      if (error instanceof DamagedIndexError || isIndexFileFailure(error)) {
        warn(`${path} is damaged (${(error as Error).message}): it is rebuilt from the chain`);
      }
      removeIndexFiles(path);
    }
  }
}

/**
 * What index.db at `path` holds past `block`, when it holds `block` itself with that hash (so
 * it indexed this chain): its last block and how many vault transactions lie past `block`.
 * Undefined when it holds nothing past it, or cannot say (no file, damaged, another chain).
 * Read-only, before the indexer opens the file.
 */
export function indexedPast(
  path: string,
  block: { number: number; hash: string },
): { indexedBlock: number; transactions: number } | undefined {
  if (!existsSync(path)) return undefined;
  let db: DatabaseSync | undefined;
  try {
    db = new DatabaseSync(path, { readOnly: true });
    const same = db.prepare('SELECT hash FROM blocks WHERE number = ?').get(block.number) as
      | { hash: string }
      | undefined;
    if (same?.hash.toLowerCase() !== block.hash.toLowerCase()) return undefined;
    const last = Number(
      (db.prepare('SELECT MAX(number) AS n FROM blocks').get() as { n: number }).n,
    );
    if (last <= block.number) return undefined;
    const { n } = db
      .prepare('SELECT COUNT(*) AS n FROM transactions WHERE block_number > ?')
      .get(block.number) as { n: number };
    return { indexedBlock: last, transactions: Number(n) };
  } catch {
    return undefined;
  } finally {
    try {
      db?.close();
    } catch {
      // Closing what failed to open is best effort.
    }
  }
}

/** Deletes index.db with its WAL and shared-memory files, for a rebuild. */
export function removeIndexFiles(path: string): void {
  for (const suffix of ['', '-wal', '-shm']) rmSync(`${path}${suffix}`, { force: true });
}

class DamagedIndexError extends Error {}
