import type pg from 'pg';
import { migrateVersioned } from '../store/migrations-postgres.ts';

/**
 * The index's tables on PostgreSQL: the same tables as index.db's (schema.ts), in a schema of
 * their own (INDEX_SCHEMA) of the database that holds the sandbox's tables (in public), so that
 * a rebuild or a chain's reset empties the index's tables alone. Where the dialects differ:
 * - uint256 amounts are NUMERIC(78, 0), where index.db holds decimal TEXT: pg hands NUMERIC back
 *   as a decimal string, as node:sqlite hands the TEXT, and PostgreSQL also compares and sums it
 *   as a number (index.db's is summed in JavaScript);
 * - TEXT is compared byte by byte (COLLATE "C"), as SQLite's BINARY does;
 * - the version is a row of schema_version (a newer one is refused), not index_meta's format:
 *   a later change of the tables is a migration here, where index.db is started afresh.
 * index_meta keeps the chain the tables were indexed from: another chain's are emptied.
 */
export const INDEX_SCHEMA = 'sandbox_index';

const AMOUNT = 'NUMERIC(78, 0)';
const TEXT = 'TEXT COLLATE "C"';

/** Each migration of the index's schema, in order; a released one never changes. */
export const INDEX_MIGRATIONS: readonly string[] = [
  `
CREATE TABLE index_meta (
  key ${TEXT} PRIMARY KEY,
  value ${TEXT} NOT NULL
);
CREATE TABLE blocks (
  number BIGINT PRIMARY KEY,
  hash ${TEXT} NOT NULL,
  parent_hash ${TEXT} NOT NULL,
  timestamp BIGINT NOT NULL
);
CREATE TABLE logs (
  block_number BIGINT NOT NULL,
  log_index INTEGER NOT NULL,
  block_hash ${TEXT} NOT NULL,
  tx_index INTEGER NOT NULL,
  tx_hash ${TEXT} NOT NULL,
  address ${TEXT} NOT NULL,
  topic0 ${TEXT},
  topic1 ${TEXT},
  topic2 ${TEXT},
  topic3 ${TEXT},
  data ${TEXT} NOT NULL,
  PRIMARY KEY (block_number, log_index)
);
CREATE TABLE failed_calls (
  block_number BIGINT NOT NULL,
  tx_index INTEGER NOT NULL,
  tx_hash ${TEXT} NOT NULL,
  from_address ${TEXT} NOT NULL,
  to_address ${TEXT} NOT NULL,
  input ${TEXT} NOT NULL,
  PRIMARY KEY (block_number, tx_index)
);
CREATE TABLE vault_corrections (
  block_number BIGINT NOT NULL,
  vault ${TEXT} NOT NULL,
  balance ${AMOUNT} NOT NULL,
  reserved ${AMOUNT} NOT NULL,
  total_supply ${AMOUNT} NOT NULL,
  apy_bps BIGINT NOT NULL,
  last_accrual BIGINT NOT NULL,
  PRIMARY KEY (block_number, vault)
);
CREATE TABLE vaults (
  address ${TEXT} PRIMARY KEY,
  created_block BIGINT NOT NULL,
  created_at BIGINT NOT NULL,
  fulfillment_delay BIGINT
);
CREATE TABLE vault_states (
  vault ${TEXT} NOT NULL,
  block_number BIGINT NOT NULL,
  timestamp BIGINT NOT NULL,
  balance ${AMOUNT} NOT NULL,
  reserved ${AMOUNT} NOT NULL,
  total_supply ${AMOUNT} NOT NULL,
  apy_bps BIGINT NOT NULL,
  last_accrual BIGINT NOT NULL,
  PRIMARY KEY (vault, block_number)
);
CREATE INDEX vault_states_by_vault_time ON vault_states (vault, timestamp, block_number);
CREATE TABLE transactions (
  block_number BIGINT NOT NULL,
  log_index INTEGER NOT NULL,
  hash ${TEXT} NOT NULL,
  type ${TEXT} NOT NULL,
  vault ${TEXT} NOT NULL,
  user_address ${TEXT} NOT NULL,
  amount ${AMOUNT} NOT NULL,
  shares ${AMOUNT},
  status ${TEXT} NOT NULL,
  timestamp BIGINT NOT NULL,
  request_id ${TEXT},
  PRIMARY KEY (block_number, log_index)
);
CREATE INDEX transactions_by_user
  ON transactions (user_address, block_number DESC, log_index DESC);
CREATE INDEX transactions_by_request ON transactions (vault, request_id);
CREATE INDEX transactions_by_status ON transactions (status, type);
CREATE INDEX transactions_by_time ON transactions (timestamp);
CREATE INDEX requests_pending_by_time
  ON transactions (vault, timestamp, block_number, log_index) WHERE status = 'pending';
CREATE TABLE positions (
  user_address ${TEXT} NOT NULL,
  vault ${TEXT} NOT NULL,
  shares ${AMOUNT} NOT NULL,
  net_deposited ${AMOUNT} NOT NULL,
  deposited_at BIGINT,
  pending_deposit ${AMOUNT} NOT NULL,
  claimable_deposit ${AMOUNT} NOT NULL,
  pending_redeem ${AMOUNT} NOT NULL,
  claimable_redeem ${AMOUNT} NOT NULL,
  PRIMARY KEY (user_address, vault)
);
CREATE INDEX positions_claimable ON positions (vault)
  WHERE claimable_deposit <> '0' OR claimable_redeem <> '0';
CREATE TABLE strategies (
  id ${TEXT} PRIMARY KEY,
  owner ${TEXT} NOT NULL,
  name ${TEXT} NOT NULL,
  status ${TEXT} NOT NULL,
  created_at BIGINT NOT NULL,
  status_changed_at BIGINT NOT NULL,
  paper_trading_at BIGINT
);
`,
  // 2: Part A's reads answered from the index (strategies' descriptions and order, the
  // governor's proposals and votes, AgentPass holdings). The rows indexed before lack them:
  // every table is emptied and the chain indexed again (the chain check below marks it anew).
  `
TRUNCATE blocks, logs, failed_calls, vault_corrections, vaults, vault_states, transactions,
  positions, strategies, index_meta;
ALTER TABLE logs ADD COLUMN tx_input ${TEXT};
ALTER TABLE strategies ADD COLUMN description ${TEXT} NOT NULL,
  ADD COLUMN created_block BIGINT NOT NULL,
  ADD COLUMN created_log INTEGER NOT NULL;
CREATE INDEX strategies_by_owner ON strategies (owner, created_block, created_log);
CREATE TABLE proposals (
  id BIGINT PRIMARY KEY,
  proposer ${TEXT} NOT NULL,
  title ${TEXT} NOT NULL,
  description ${TEXT} NOT NULL,
  vote_start BIGINT NOT NULL,
  vote_end BIGINT NOT NULL,
  for_votes BIGINT NOT NULL,
  against_votes BIGINT NOT NULL,
  abstain_votes BIGINT NOT NULL
);
CREATE INDEX proposals_by_end ON proposals (vote_end);
CREATE TABLE votes (
  proposal_id BIGINT NOT NULL,
  voter ${TEXT} NOT NULL,
  support INTEGER NOT NULL,
  block_number BIGINT NOT NULL,
  log_index INTEGER NOT NULL,
  PRIMARY KEY (proposal_id, voter)
);
CREATE INDEX votes_by_voter ON votes (voter);
CREATE TABLE agent_passes (
  token_id BIGINT PRIMARY KEY,
  owner ${TEXT} NOT NULL,
  owner_index BIGINT NOT NULL
);
CREATE INDEX agent_passes_by_owner ON agent_passes (owner, owner_index);
`,
  // 3: the commit feed (team/commit-feed.ts): one row per commit of the index, what its
  // subscribers were told, for replicas to read after a NOTIFY or a reconnect. Not emptied with
  // the index's tables: a replica's place in it (seq) outlives a rebuild.
  `
CREATE TABLE index_commits (
  seq BIGSERIAL PRIMARY KEY,
  block BIGINT,
  reorg BOOLEAN NOT NULL,
  vaults JSONB NOT NULL,
  transactions JSONB NOT NULL,
  at_ms BIGINT NOT NULL
);
`,
  // 4: the wallet's balances answered from the index (ETH read per touched account, USDC's and
  // AGNT's from every Transfer, not only a vault's). The logs indexed before lack the other
  // transfers: every table is emptied and the chain indexed again.
  `
TRUNCATE blocks, logs, failed_calls, vault_corrections, vaults, vault_states, transactions,
  positions, strategies, proposals, votes, agent_passes, index_meta;
CREATE TABLE eth_balances (
  address ${TEXT} NOT NULL,
  block_number BIGINT NOT NULL,
  balance ${AMOUNT} NOT NULL,
  PRIMARY KEY (address, block_number)
);
CREATE TABLE token_balances (
  token ${TEXT} NOT NULL,
  address ${TEXT} NOT NULL,
  balance ${AMOUNT} NOT NULL,
  PRIMARY KEY (token, address)
);
`,
];

/**
 * Every table of the index's schema, emptied together when it starts afresh (and copied by a
 * snapshot: index_meta, which names the chain, is not among them).
 */
export const INDEX_TABLES = [
  'blocks',
  'logs',
  'failed_calls',
  'vault_corrections',
  'vaults',
  'vault_states',
  'transactions',
  'positions',
  'strategies',
  'proposals',
  'votes',
  'agent_passes',
  'eth_balances',
  'token_balances',
];

/**
 * Not the store's (migrations-postgres.ts): the index migrates apart from the store. Nor the
 * writer lock's (team/writer-lock.ts, 0x61676e74_02), which the writer holds on the store's
 * connection for its whole life: the index, opened after it on a connection of its own, would
 * wait for it forever.
 */
const INDEX_MIGRATION_LOCK = 0x61676e74_03;

/** The words of the refusal of an index schema made by a newer agentctl. */
export function newerIndexSchemaMessage(version: number): string {
  return `its index schema (${INDEX_SCHEMA}) is version ${version}, newer than this agentctl knows (${INDEX_MIGRATIONS.length}); upgrade agentctl`;
}

/**
 * Brings the index's schema up to date on `client` (outside any transaction; its search_path is
 * INDEX_SCHEMA), and empties its tables when they were indexed from a chain other than
 * `identity`'s (said through `warn`). One transaction: DDL is transactional on PostgreSQL.
 */
export async function migrateIndexPostgres(
  client: pg.ClientBase,
  identity: string,
  warn: (message: string) => void,
): Promise<void> {
  await migrateVersioned(client, {
    lock: INDEX_MIGRATION_LOCK,
    known: INDEX_MIGRATIONS.length,
    step: (version) => INDEX_MIGRATIONS[version - 1] as string,
    newer: newerIndexSchemaMessage,
    prepare: `CREATE SCHEMA IF NOT EXISTS ${INDEX_SCHEMA}`,
    async finish() {
      const chain = await client.query<{ value: string }>(
        "SELECT value FROM index_meta WHERE key = 'chain'",
      );
      const held = chain.rows[0]?.value;
      if (held !== identity) {
        if (held !== undefined) {
          warn(
            `the index in ${INDEX_SCHEMA} was built for another chain or deployment: it is emptied and the chain indexed again`,
          );
        }
        await emptyIndex(client, identity);
      }
    },
  });
}

/** Empties every table of the index (inside a transaction). */
export const EMPTY_INDEX_SQL = `TRUNCATE ${INDEX_TABLES.join(', ')}`;
/** Marks the index as the chain's whose identity is the one parameter (`?`). */
export const SET_CHAIN_SQL = `INSERT INTO index_meta (key, value) VALUES ('chain', ?)
  ON CONFLICT (key) DO UPDATE SET value = excluded.value`;

/** Empties every table of the index, and marks it as `identity`'s (inside a transaction). */
async function emptyIndex(client: pg.ClientBase, identity: string): Promise<void> {
  await client.query(EMPTY_INDEX_SQL);
  await client.query(SET_CHAIN_SQL.replace('?', '$1'), [identity]);
}
