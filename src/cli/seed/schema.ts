import { validateMnemonic } from '@scure/bip39';
import { english } from 'viem/accounts';
import { z } from 'zod';
import {
  AdvanceClockRequest,
  CreateProposalRequest,
  DepositRequest,
  FundRequest,
  NodeRequest,
  RegisterRequest,
  StrategyStatusRequest,
  StrategySubmitRequest,
  VoteRequest,
} from '../../api/schemas/index.ts';
import { STRATEGY_STATUSES, TIERS, VOTE_SUPPORT } from '../../api/schemas/values.ts';
import { closest } from '../suggest.ts';

/**
 * The seed file (`agentctl sandbox seed FILE`): one schema for the whole file. Every step's
 * fields are the API's own, checked by the contract's schemas; a field may instead hold a
 * reference to an earlier step's result (`${alice.api_key}`), checked here for its step and
 * field, and checked again for its value once the run has resolved it.
 */

export const SEED_FORMAT_VERSION = 1;

/** A step's name: what later steps refer to it by, and its key in the output map. */
export const STEP_NAME = /^[A-Za-z_][A-Za-z0-9_-]{0,63}$/;

/** `${step.field}`, anywhere in a string. */
export const REFERENCE = /\$\{([^}]*)\}/g;
const REFERENCE_PARTS = /^([A-Za-z_][A-Za-z0-9_-]{0,63})\.([a-z_]+)$/;

const apiKey = z.string().min(1, { error: 'must not be empty' });
const privateKey = z
  .string()
  .regex(/^0x[0-9a-fA-F]{64}$/, { error: 'must be 0x followed by 64 hex digits' });

/**
 * Each step kind's fields, as they are sent once references are resolved. A kind's results
 * (OUTPUTS) are what later steps may refer to and what the output map holds.
 */
export const STEP_KINDS = {
  /** Registers a wallet (nonce, EIP-191 signature), then sets its tier when given. */
  agent: RegisterRequest.omit({ wallet_address: true, signature: true, nonce: true }).extend({
    operator_address: RegisterRequest.shape.operator_address.optional(),
    tier: z.enum(TIERS, { error: `must be one of ${TIERS.join(', ')}` }).optional(),
    private_key: privateKey.optional(),
    key_index: z
      .number({ error: 'must be a whole number' })
      .int({ error: 'must be a whole number' })
      .min(0, { error: 'must be 0 or more' })
      .max(2 ** 31 - 1, { error: 'must be below 2^31' })
      .optional(),
  }),
  /** Mints test USDC and sends ETH (admin). */
  fund: z.object(FundRequest.shape),
  deposit: DepositRequest.extend({ api_key: apiKey }),
  /** Submits a strategy, then walks it to `status` (shadow → … → live; paused, deprecated). */
  strategy: StrategySubmitRequest.extend({
    api_key: apiKey,
    status: StrategyStatusRequest.shape.status.optional(),
  }),
  /** One lifecycle move of a strategy (admin): for example live to paused. */
  strategy_status: StrategyStatusRequest,
  /** Opens a governance proposal (admin). */
  proposal: CreateProposalRequest,
  vote: z.object({
    api_key: apiKey,
    proposal_id: VoteRequest.shape.proposal_id,
    support: z.enum(Object.keys(VOTE_SUPPORT) as [keyof typeof VOTE_SUPPORT], {
      error: 'must be for, against or abstain',
    }),
    reason: VoteRequest.shape.reason,
  }),
  /** A data API node (admin); its key is in the output map. */
  node: NodeRequest,
  /** Moves the sandbox clock and the chain's time forward (admin). */
  advance: AdvanceClockRequest,
} as const;

export type StepKind = keyof typeof STEP_KINDS;
export const KIND_NAMES = Object.keys(STEP_KINDS) as StepKind[];
export type StepBody<K extends StepKind> = z.output<(typeof STEP_KINDS)[K]>;

/** The results of each kind of step: what `${step.field}` may name. */
export const OUTPUTS: Record<StepKind, readonly string[]> = {
  agent: ['address', 'agent_address', 'agent_id', 'agent_name', 'api_key', 'tier'],
  fund: ['address', 'usdc_balance_raw', 'eth_balance_wei'],
  deposit: [
    'agent_address',
    'vault_id',
    'vault_address',
    'status',
    'deposit_tx',
    'shares_balance',
    'request_id',
    'fulfillable_at',
  ],
  strategy: ['strategy_id', 'dna_string', 'status', 'tx_hash', 'agent_address'],
  strategy_status: ['strategy_id', 'previous_status', 'status', 'tx_hash'],
  proposal: ['proposal_id', 'vote_end', 'tx_hash'],
  vote: ['proposal_id', 'support', 'agent_address', 'tx_hash'],
  node: ['node_id', 'node_key'],
  advance: ['now', 'offset_seconds'],
};

/** Whether a step uses the admin API, so needs the admin token. */
export function needsAdminToken(step: SeedStep): boolean {
  switch (step.kind) {
    case 'agent':
      return step.body.tier !== undefined;
    case 'strategy':
      return step.body.status !== undefined;
    case 'deposit':
    case 'vote':
      return false;
    default:
      return true;
  }
}

/** One step as the file gives it: its fields may still hold references. */
export interface SeedStep {
  name: string;
  kind: StepKind;
  body: Record<string, unknown>;
}

export interface SeedFile {
  version: typeof SEED_FORMAT_VERSION;
  seed_phrase?: string | undefined;
  steps: SeedStep[];
}

/** Whether a value is a string holding at least one reference. */
export function hasReference(value: unknown): value is string {
  return typeof value === 'string' && value.includes('${');
}

/** The references in a string, each as step and field (undefined parts when malformed). */
export function referencesIn(text: string): { text: string; step?: string; field?: string }[] {
  return [...text.matchAll(REFERENCE)].map((match) => {
    const parts = REFERENCE_PARTS.exec(match[1] ?? '');
    return parts ? { text: match[0], step: parts[1], field: parts[2] } : { text: match[0] };
  });
}

type Issue = { path: PropertyKey[]; message: string };

/** A step's fields: the kind's schema field by field, references and unknown keys aside. */
function checkBody(
  kind: StepKind,
  body: unknown,
  earlier: Map<string, StepKind>,
  add: (path: PropertyKey[], message: string) => void,
): void {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    add([], `must be an object of the ${kind} fields`);
    return;
  }
  const shape = STEP_KINDS[kind].shape as Record<string, z.ZodType>;
  const fields = Object.keys(shape);
  const values = body as Record<string, unknown>;
  // In the file's order, then the fields it leaves out (a required one is reported missing).
  const keys = [...Object.keys(values), ...fields.filter((field) => !Object.hasOwn(values, field))];
  for (const field of keys) {
    const schema = shape[field];
    if (schema === undefined) {
      const near = closest(field, fields);
      add(
        [field],
        `unknown field${near ? ` (did you mean ${near}?)` : ''}; fields: ${fields.join(', ')}`,
      );
      continue;
    }
    const value = values[field];
    if (hasReference(value)) {
      for (const reference of referencesIn(value)) {
        const problem = referenceProblem(reference, earlier);
        if (problem) add([field], problem);
      }
      continue;
    }
    const checked = schema.safeParse(value);
    for (const issue of checked.error?.issues ?? []) add([field, ...issue.path], issue.message);
  }
  if (kind === 'agent' && values.private_key !== undefined && values.key_index !== undefined) {
    add(['key_index'], 'give private_key or key_index, not both');
  }
  if (kind === 'fund' && values.usdc === undefined && values.eth === undefined) {
    add([], 'give usdc, eth or both');
  }
}

/** What is wrong with one reference, if anything: its form, its step, its field. */
function referenceProblem(
  reference: { text: string; step?: string; field?: string },
  earlier: Map<string, StepKind>,
): string | undefined {
  const { step, field } = reference;
  if (step === undefined || field === undefined) {
    return `${reference.text}: a reference is \${step.field}, for example \${alice.api_key}`;
  }
  const kind = earlier.get(step);
  if (kind === undefined) {
    const near = closest(step, [...earlier.keys()]);
    return `${reference.text}: no earlier step is named ${step}${near ? ` (did you mean ${near}?)` : ''}`;
  }
  if (!OUTPUTS[kind].includes(field)) {
    const near = closest(field, OUTPUTS[kind]);
    return `${reference.text}: step ${step} (${kind}) gives ${OUTPUTS[kind].join(', ')}${near ? ` (did you mean ${near}?)` : ''}`;
  }
  return undefined;
}

const Steps = z.array(z.unknown(), { error: 'must be a list of steps' }).min(1, {
  error: 'must hold at least one step',
});

/** The envelope's fields: the format version, the seed phrase, the steps. */
const ENVELOPE = {
  version: z.literal(SEED_FORMAT_VERSION, {
    error: `must be ${SEED_FORMAT_VERSION} (the seed file format this agentctl reads)`,
  }),
  seed_phrase: z
    .string({ error: 'must be a BIP-39 mnemonic' })
    .transform((phrase) => phrase.trim().replace(/\s+/g, ' '))
    .refine((phrase) => validateMnemonic(phrase, english), {
      error: 'must be a BIP-39 mnemonic (12 to 24 English words with a valid checksum)',
    })
    .optional(),
  steps: Steps,
};

/**
 * The whole file: the envelope, then every step (kind, name, fields, references, keys). Each
 * part is checked whatever the others hold, so that one run reports every problem.
 */
export const SeedFileSchema = z.unknown().transform((input, ctx): SeedFile => {
  const issues: Issue[] = [];
  const add = (path: PropertyKey[], message: string) => issues.push({ path, message });
  const report = () => {
    for (const issue of issues) {
      ctx.addIssue({ code: 'custom', path: issue.path, message: issue.message, input: undefined });
    }
    return z.NEVER;
  };
  if (typeof input !== 'object' || input === null || Array.isArray(input)) {
    add([], 'must be a JSON object: {"version": 1, "steps": [...]}');
    return report();
  }
  const given = input as Record<string, unknown>;
  const envelope = Object.keys(ENVELOPE);
  for (const key of Object.keys(given).filter((key) => !envelope.includes(key))) {
    const near = closest(key, envelope);
    add(
      [key],
      `unknown field${near ? ` (did you mean ${near}?)` : ''}; fields: ${envelope.join(', ')}`,
    );
  }
  const file = {} as { version: 1; seed_phrase?: string | undefined; steps: unknown[] };
  for (const [field, schema] of Object.entries(ENVELOPE)) {
    const checked = (schema as z.ZodType).safeParse(given[field]);
    if (checked.success) Object.assign(file, { [field]: checked.data });
    else for (const issue of checked.error.issues) add([field, ...issue.path], issue.message);
  }
  const hasSeedPhrase = given.seed_phrase !== undefined;
  const earlier = new Map<string, StepKind>();
  const steps: SeedStep[] = [];
  const keyIndices = new Map<number, string>();
  const privateKeys = new Map<string, string>();
  let derivedAgents = 0;
  (Array.isArray(given.steps) ? (given.steps as unknown[]) : []).forEach((raw, index) => {
    const at = (path: PropertyKey[], message: string) => add(['steps', index, ...path], message);
    if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) {
      at([], `must be an object: {"name": ..., "<kind>": {...}}`);
      return;
    }
    const step = raw as Record<string, unknown>;
    const name = step.name;
    if (typeof name !== 'string' || !STEP_NAME.test(name)) {
      at(
        ['name'],
        name === undefined
          ? 'missing: every step has a name, which later steps refer to'
          : 'must be 1 to 64 of A-Z a-z 0-9 _ -, starting with a letter or _',
      );
    } else if (earlier.has(name)) {
      at(['name'], `${name} is the name of an earlier step; names must be unique`);
    }
    const kinds = Object.keys(step).filter((key) => key !== 'name');
    const known = kinds.filter((key): key is StepKind => Object.hasOwn(STEP_KINDS, key));
    for (const key of kinds.filter((key) => !Object.hasOwn(STEP_KINDS, key))) {
      const near = closest(key, KIND_NAMES);
      at(
        [key],
        `unknown step kind${near ? ` (did you mean ${near}?)` : ''}; kinds: ${KIND_NAMES.join(', ')}`,
      );
    }
    if (known.length !== 1) {
      if (known.length > 1) at([], `has ${known.join(' and ')}; a step does one thing`);
      else if (kinds.length === 0) at([], `names no step kind; kinds: ${KIND_NAMES.join(', ')}`);
      return;
    }
    const kind = known[0] as StepKind;
    checkBody(kind, step[kind], earlier, (path, message) => at([kind, ...path], message));
    // A copy: the defaults filled in below are the run's, not the caller's input.
    const body = { ...(step[kind] as Record<string, unknown>) };
    if (kind === 'agent') {
      if (typeof body.private_key === 'string') {
        const key = body.private_key.toLowerCase();
        const other = privateKeys.get(key);
        if (other) at([kind, 'private_key'], `is the key of step ${other} too`);
        privateKeys.set(key, String(name));
      } else {
        const keyIndex = typeof body.key_index === 'number' ? body.key_index : derivedAgents;
        derivedAgents++;
        if (!hasSeedPhrase) {
          at([kind], 'needs a private_key, or a seed_phrase in the file to derive its key from');
        }
        const other = keyIndices.get(keyIndex);
        if (other) at([kind, 'key_index'], `${keyIndex} is the key index of step ${other} too`);
        keyIndices.set(keyIndex, String(name));
        body.key_index = keyIndex;
      }
    }
    if (typeof name === 'string' && STEP_NAME.test(name)) {
      if (!earlier.has(name)) earlier.set(name, kind);
      steps.push({ name, kind, body });
    }
  });
  if (issues.length > 0) return report();
  return { version: file.version, seed_phrase: file.seed_phrase, steps };
});

/**
 * Every problem of a file at once, one per line, each named by its step (name and place)
 * and field: `step alice (steps[0]) agent.agent_name: must be …`.
 */
export function describeSeedProblems(error: z.ZodError, input: unknown): string[] {
  const steps = (input as { steps?: unknown } | null)?.steps;
  return error.issues.map((issue) => {
    const [first, index, ...rest] = issue.path;
    if (first === 'steps' && typeof index === 'number') {
      const name = (Array.isArray(steps) ? (steps[index] as { name?: unknown }) : undefined)?.name;
      const where =
        typeof name === 'string' && name !== ''
          ? `step ${name} (steps[${index}])`
          : `steps[${index}]`;
      return `${where}${rest.length > 0 ? ` ${rest.join('.')}` : ''}: ${issue.message}`;
    }
    return `${issue.path.length > 0 ? issue.path.join('.') : 'file'}: ${issue.message}`;
  });
}

/**
 * The moves that take a new strategy (shadow) to `to`: along the pipeline one stage at a
 * time, as the registry allows; paused and deprecated in one move.
 */
export function lifecyclePath(to: (typeof STRATEGY_STATUSES)[number]): string[] {
  if (to === 'paused' || to === 'deprecated') return [to];
  return STRATEGY_STATUSES.slice(1, STRATEGY_STATUSES.indexOf(to) + 1);
}
