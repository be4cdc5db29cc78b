import type { Database } from './db.ts';

export interface NodeRow {
  node_id: string;
  name: string;
  operator_address: string;
  created_at: number;
}

/** Nodes registered for the data API's Node Operator tier; their keys are stored as hashes only. */
export function createNodeStore(db: Database) {
  const insert = db.prepare(
    'INSERT INTO nodes (node_id, name, operator_address, key_hash, created_at) VALUES (?, ?, ?, ?, ?)',
  );
  const all = db.prepare(
    'SELECT node_id, name, operator_address, created_at FROM nodes ORDER BY created_at, node_id',
  );
  const byKeyHash = db.prepare(
    'SELECT node_id, name, operator_address, created_at FROM nodes WHERE key_hash = ?',
  );
  return {
    insert(node: NodeRow, keyHash: string): void {
      insert.run(node.node_id, node.name, node.operator_address, keyHash, node.created_at);
    },
    list(): NodeRow[] {
      return all.all() as unknown as NodeRow[];
    },
    findByKeyHash(hash: string): NodeRow | undefined {
      return byKeyHash.get(hash) as NodeRow | undefined;
    },
  };
}
export type NodeStore = ReturnType<typeof createNodeStore>;
