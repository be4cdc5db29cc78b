import type { Sql } from './sql.ts';

export interface NodeRow {
  node_id: string;
  name: string;
  operator_address: string;
  created_at: number;
}

/** Nodes registered for the data API's Node Operator tier; their keys are stored as hashes only. */
export function createNodeStore(sql: Sql) {
  return {
    async insert(node: NodeRow, keyHash: string): Promise<void> {
      await sql.run(
        'INSERT INTO nodes (node_id, name, operator_address, key_hash, created_at) VALUES (?, ?, ?, ?, ?)',
        node.node_id,
        node.name,
        node.operator_address,
        keyHash,
        node.created_at,
      );
    },
    list(): Promise<NodeRow[]> {
      return sql.all<NodeRow>(
        'SELECT node_id, name, operator_address, created_at FROM nodes ORDER BY created_at, node_id',
      );
    },
    findByKeyHash(hash: string): Promise<NodeRow | undefined> {
      return sql.get<NodeRow>(
        'SELECT node_id, name, operator_address, created_at FROM nodes WHERE key_hash = ?',
        hash,
      );
    },
  };
}
export type NodeStore = ReturnType<typeof createNodeStore>;
