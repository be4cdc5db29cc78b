/**
 * Versioned schema migrations, in SQLite's dialect. Entry N takes the schema from version N to
 * N+1 (PRAGMA user_version on SQLite, the schema_version table on PostgreSQL, where
 * migrations-postgres.ts translates each entry). Never edit a released entry; append a new one.
 */
export const MIGRATIONS: readonly string[] = [
  `
  CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
  ) STRICT;

  CREATE TABLE nonces (
    nonce       TEXT PRIMARY KEY,
    wallet      TEXT NOT NULL,     -- lowercase
    domain      TEXT NOT NULL,     -- host named in the message
    issued_at   INTEGER NOT NULL,  -- sandbox Unix seconds
    expires_at  INTEGER NOT NULL,
    consumed_at INTEGER
  ) STRICT;
  CREATE INDEX nonces_expiry ON nonces (expires_at);

  CREATE TABLE agents (
    agent_id             TEXT PRIMARY KEY,
    wallet_address       TEXT NOT NULL,
    wallet_key           TEXT NOT NULL UNIQUE,  -- lowercase, for case-insensitive identity
    agent_name           TEXT NOT NULL,
    agent_type           TEXT NOT NULL,
    description          TEXT,
    operator_address     TEXT NOT NULL,
    operator_email       TEXT,
    operator_name        TEXT,
    framework            TEXT,
    repo_url             TEXT,
    tier                 TEXT NOT NULL,
    status               TEXT NOT NULL DEFAULT 'active',
    strategies_submitted INTEGER NOT NULL DEFAULT 0,
    performance_score    REAL NOT NULL DEFAULT 0,
    created_at           INTEGER NOT NULL       -- sandbox Unix milliseconds
  ) STRICT;
  CREATE INDEX agents_ranking ON agents (performance_score DESC, created_at);

  CREATE TABLE api_keys (
    key_hash   TEXT PRIMARY KEY,               -- SHA-256 of the key, hex; the key itself is never stored
    key_prefix TEXT NOT NULL,
    agent_id   TEXT NOT NULL REFERENCES agents (agent_id),
    created_at INTEGER NOT NULL
  ) STRICT;
  CREATE INDEX api_keys_agent ON api_keys (agent_id);
  `,
  // 2: the chain. Each agent gets a server-side wallet (an HD index and its address);
  // activity counters mirror confirmed transactions, and performance_score is derived
  // from them (see README, "Leaderboard"); faucet drips record the cooldown.
  `
  ALTER TABLE agents ADD COLUMN wallet_index INTEGER;
  ALTER TABLE agents ADD COLUMN agent_address TEXT;
  ALTER TABLE agents ADD COLUMN deposited_usdc_raw INTEGER NOT NULL DEFAULT 0;
  ALTER TABLE agents ADD COLUMN votes_cast INTEGER NOT NULL DEFAULT 0;
  CREATE UNIQUE INDEX agents_wallet_index ON agents (wallet_index);

  DROP INDEX agents_ranking;
  ALTER TABLE agents DROP COLUMN performance_score;
  ALTER TABLE agents ADD COLUMN performance_score REAL GENERATED ALWAYS AS (
    round(10.0 * strategies_submitted + deposited_usdc_raw / 100000000.0 + 5.0 * votes_cast, 2)
  ) VIRTUAL;
  CREATE INDEX agents_ranking ON agents (performance_score DESC, created_at);

  CREATE TABLE faucet_drips (
    agent_id     TEXT PRIMARY KEY REFERENCES agents (agent_id),
    last_drip_at INTEGER NOT NULL,  -- sandbox Unix seconds of the confirmed drip
    tx_hash      TEXT NOT NULL
  ) STRICT;
  `,
  // 3: the chain log. Every block the sandbox's chain gains since its last checkpoint, with
  // the raw signed transactions in it, committed in the same transaction as the off-chain rows
  // of the writes that made it. Replaying it onto the checkpoint rebuilds the chain exactly.
  `
  CREATE TABLE chain_blocks (
    number      INTEGER PRIMARY KEY,
    hash        TEXT NOT NULL,
    parent_hash TEXT NOT NULL,
    timestamp   INTEGER NOT NULL,   -- chain Unix seconds
    txs         TEXT NOT NULL       -- JSON array of raw signed transactions (hex), in block order
  ) STRICT;
  `,
  // 4: the onboarding outbox. A registration commits its agent and a row here together;
  // the onboarding transaction that funds the agent's wallet deletes the row in the commit
  // that logs its block. Rows left at a restart are onboarded then.
  `
  CREATE TABLE onboarding_queue (
    agent_id          TEXT PRIMARY KEY REFERENCES agents (agent_id),
    agent_address     TEXT NOT NULL,
    registered_wallet TEXT NOT NULL,
    queued_at         INTEGER NOT NULL   -- sandbox Unix milliseconds
  ) STRICT;
  `,
  // 5: the fulfiller finds a request's controller among the agents by its wallet address;
  // nodes registered for the data API's Node Operator tier, with their keys' hashes.
  `
  CREATE INDEX agents_agent_address ON agents (agent_address);
  CREATE TABLE nodes (
    node_id          TEXT PRIMARY KEY,
    name             TEXT NOT NULL,
    operator_address TEXT NOT NULL,
    key_hash         TEXT NOT NULL UNIQUE,
    created_at       INTEGER NOT NULL   -- sandbox Unix seconds
  ) STRICT;
  `,
  // 6: idempotency keys (Idempotency-Key on writes). A keyed write's row commits in the same
  // transaction as the write's own rows and block, so after a crash both are there or neither.
  // Neither the key nor the answer is kept as sent: the id is a hash of the caller's scope and
  // the key, and the answer (which may hold a new API key) is encrypted under a key derived
  // from the idempotency key, which only the caller has.
  `
  CREATE TABLE idempotency_keys (
    id          TEXT PRIMARY KEY,   -- SHA-256 of scope and key, hex
    scope       TEXT NOT NULL,      -- SHA-256 of the scope alone, hex: keys are bounded per caller
    fingerprint TEXT NOT NULL,      -- SHA-256 of the method, the route and the canonical body, hex
    status      INTEGER NOT NULL,   -- the answer's HTTP status
    answer      BLOB NOT NULL,      -- the answer's body: AES-256-GCM, IV and tag included
    created_ms  INTEGER NOT NULL,   -- wall-clock Unix milliseconds (never sandbox time)
    -- 1 for the writes a restore does not undo (snapshot files, restores): their keys stay
    -- when a snapshot's rows replace the rest.
    outlives_restore INTEGER NOT NULL DEFAULT 0
  ) STRICT;
  CREATE INDEX idempotency_keys_created ON idempotency_keys (created_ms);
  CREATE INDEX idempotency_keys_scope ON idempotency_keys (scope);
  `,
  // 7: rate limit counts, when the server counts in the database (rateLimitCounts 'database':
  // replicas sharing one database count each caller once, not once per replica). One row per
  // scope and caller, and window length; the window starts at the caller's first request in it,
  // as @fastify/rate-limit's memory store does. Rows whose window is over are purged in the
  // background, and the table is bounded (store/rate-counts.ts). Keys name an IP address, an
  // agent id or a node id, never an API key.
  `
  CREATE TABLE rate_counts (
    key        TEXT NOT NULL,     -- the scope, then the caller (public:203.0.113.7)
    window_ms  INTEGER NOT NULL,  -- the window's length (a minute, a day)
    count      INTEGER NOT NULL,  -- requests counted in the window
    expires_ms INTEGER NOT NULL,  -- wall-clock Unix milliseconds at which the window ends
    PRIMARY KEY (key, window_ms)
  ) STRICT;
  CREATE INDEX rate_counts_expiry ON rate_counts (expires_ms);
  `,
];

/**
 * Why a database whose schema is `version` is refused: a newer agentctl made it. `known` is
 * the newest version this agentctl knows (PostgreSQL's has tables of its own: its versions
 * run further).
 */
export function newerSchemaMessage(version: number, known: number = MIGRATIONS.length): string {
  return `its schema is version ${version}, newer than this agentctl knows (${known}); upgrade agentctl`;
}
