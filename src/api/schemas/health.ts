import { z } from 'zod';

export const Health = z.object({
  status: z.string(),
  version: z.string(),
  chain_id: z.number().int(),
  chain_name: z.string(),
  rpc_connected: z.boolean(),
  /** Why status is "degraded"; absent when it is "ok". */
  reason: z.string().optional(),
});
export type Health = z.infer<typeof Health>;
