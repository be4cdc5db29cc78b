import { z } from 'zod';
import { Address, nameText, textUpTo, withNameRules } from './common.ts';
import { AGENT_TYPES } from './values.ts';
export const AgentType = z.enum(AGENT_TYPES);

const emptyAsAbsent = (value: unknown) => (value === '' ? undefined : value);

/** A nonce is valid this long after issue (spec: 600 s). */
export const NONCE_TTL_SECONDS = 600;

export const NonceQuery = z.object({ wallet: Address });
export type NonceQuery = z.infer<typeof NonceQuery>;

export const NonceResponse = z.object({
  nonce: z.string(),
  message: z.string(),
  expires_in_seconds: z.number().int(),
});
export type NonceResponse = z.infer<typeof NonceResponse>;

export const RegisterRequest = z.object({
  wallet_address: Address,
  signature: z.string().regex(/^0x[0-9a-fA-F]{130}$/, {
    error: 'must be a 65-byte hex signature (0x + 130 hex digits)',
  }),
  nonce: z
    .string()
    .regex(/^[0-9a-fA-F]{16,128}$/, { error: 'must be the hex nonce from the nonce endpoint' }),
  agent_name: nameText(3, 100),
  agent_type: AgentType.default('custom'),
  description: textUpTo(500).optional(),
  operator_address: Address,
  operator_email: z.email({ error: 'must be an e-mail address' }).max(254).optional(),
  // An empty optional field is an absent one, as clients that send every field write it.
  operator_name: z.preprocess(emptyAsAbsent, withNameRules(textUpTo(100)).optional()),
  framework: z.preprocess(emptyAsAbsent, withNameRules(textUpTo(50)).optional()),
  repo_url: z
    .url({ protocol: /^https?$/, error: 'must be an http or https URL' })
    .max(500)
    .optional(),
});
export type RegisterRequest = z.input<typeof RegisterRequest>;

export const RegisterResponse = z.object({
  success: z.boolean(),
  agent_id: z.string(),
  agent_name: z.string(),
  api_key: z.string(),
  api_key_prefix: z.string(),
  tier: z.string(),
  message: z.string(),
});
export type RegisterResponse = z.infer<typeof RegisterResponse>;

export const LookupQuery = z.object({ wallet: Address });

export const LookupResponse = z.discriminatedUnion('registered', [
  z.object({
    registered: z.literal(true),
    agent_name: z.string(),
    tier: z.string(),
    status: z.string(),
    strategies_submitted: z.number().int(),
    performance_score: z.number(),
    api_key_prefix: z.string(),
    created_at: z.string(),
  }),
  z.object({ registered: z.literal(false) }),
]);
export type LookupResponse = z.infer<typeof LookupResponse>;
