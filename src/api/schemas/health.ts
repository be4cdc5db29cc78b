import { z } from 'zod';

export const Health = z.object({
  status: z.string(),
  version: z.string(),
  chain_id: z.number().int(),
  chain_name: z.string(),
  rpc_connected: z.boolean(),
  /** Why status is "degraded"; absent when it is "ok". */
  reason: z.string().optional(),
  /**
   * A sandbox kept in PostgreSQL (serve --database, --replica): whether its database answers,
   * and why not. Absent on SQLite. Not in the spec (an extension, as `reason` is).
   */
  database: z
    .object({
      reachable: z.boolean(),
      reason: z.string().optional(),
    })
    .optional(),
});
export type Health = z.infer<typeof Health>;
