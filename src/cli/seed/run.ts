import { mnemonicToAccount, privateKeyToAccount } from 'viem/accounts';
import type { z } from 'zod';
import type { ApiClient } from '../../api/client.ts';
import { ApiError, UnexpectedResponseError } from '../../api/errors.ts';
import { describeZodError } from '../../api/schemas/index.ts';
import { VOTE_SUPPORT } from '../../api/schemas/values.ts';
import { adminPost } from '../admin.ts';
import { exactJsonNumber } from '../args.ts';
import { CliError, EXIT } from '../exit-codes.ts';
import { apiKeyOf, type KeptRegistrations, signAndRegister } from '../registration.ts';
import {
  hasReference,
  lifecyclePath,
  REFERENCE,
  type SeedFile,
  type SeedStep,
  STEP_KINDS,
  type StepBody,
  type StepKind,
} from './schema.ts';

type Schemas = typeof import('../../api/schemas/index.ts');

/** One step's results, by field: what later steps refer to, and its entry in the output map. */
export type StepResult = Record<string, string | number>;
/** Every step's results, by step name, in the file's order. */
export type SeedResults = Record<string, StepResult>;
/**
 * The map handed over: every step's results; a step that failed after part of it took effect
 * (an agent registered, its tier change refused) is there too, with what it created so far
 * and `"complete": false`.
 */
export type SeedMap = Record<string, Record<string, string | number | boolean>>;

/** What a run needs: a client without a key, one per agent's key, and the admin token. */
export interface SeedDeps {
  client: ApiClient;
  clientWithKey(apiKey: string): Promise<ApiClient>;
  adminToken: string | undefined;
  /**
   * Where each agent's signed registration is kept until its outcome is known: the run made
   * again with its key sends it again (see src/cli/registration.ts).
   */
  keptRegistrations?: KeptRegistrations;
  /** Called after each step, for progress. */
  done?(step: SeedStep, result: StepResult): void;
}

/**
 * A step that failed: its name and kind, why (`cause`, which keeps its own exit code), and
 * the map of what ran (the API keys it holds are not shown again): the steps before it, and
 * the failed step itself, marked `"complete": false`, when part of it took effect.
 */
export class SeedStepError extends Error {
  readonly step: string;
  readonly kind: StepKind;
  readonly results: SeedMap;
  /** What of the failed step took effect, in words ("registered 0x… (tier unverified)"). */
  readonly tookEffect: string | undefined;

  constructor(step: SeedStep, cause: unknown, results: SeedResults, partial: StepResult = {}) {
    super(`step ${step.name} (${step.kind}) failed`, { cause });
    this.name = 'SeedStepError';
    this.step = step.name;
    this.kind = step.kind;
    const tookPart = Object.keys(partial).length > 0;
    this.results = tookPart
      ? { ...results, [step.name]: { ...partial, complete: false } }
      : results;
    this.tookEffect = tookPart ? describeResult(step.kind, partial) : undefined;
  }
}

/** What a step did, in words and without secrets: its progress line, and a failure's part. */
export function describeResult(kind: StepKind, result: StepResult): string {
  switch (kind) {
    case 'agent':
      return `registered ${result.address} (tier ${result.tier})`;
    case 'fund':
      return `funded ${result.address}`;
    case 'deposit':
      return `${result.status === 'pending' ? 'requested a deposit into' : 'deposited into'} ${result.vault_id}`;
    case 'strategy':
      return `submitted ${result.strategy_id}, now ${result.status}`;
    case 'strategy_status':
      return `moved ${result.strategy_id} from ${result.previous_status} to ${result.status}`;
    case 'proposal':
      return `opened proposal ${result.proposal_id}`;
    case 'vote':
      return `voted ${result.support} on proposal ${result.proposal_id}`;
    case 'node':
      return `registered node ${result.node_id}`;
    case 'advance':
      return `the clock is ${result.offset_seconds} s ahead`;
  }
}

/** The address of an agent's signing key: its private key, or the seed phrase's key_index. */
export function agentAccount(file: Pick<SeedFile, 'seed_phrase'>, body: StepBody<'agent'>) {
  if (body.private_key) return privateKeyToAccount(body.private_key as `0x${string}`);
  if (file.seed_phrase === undefined || body.key_index === undefined) {
    // The schema refuses such a file; this keeps a caller honest.
    throw new CliError('an agent needs a private_key, or a seed phrase and key_index', EXIT.usage);
  }
  return mnemonicToAccount(file.seed_phrase, { addressIndex: body.key_index });
}

/**
 * Runs the steps in order, each with its references resolved from the results before it.
 * The first failure stops the run: SeedStepError names the step, and what of it took effect;
 * nothing after it is sent.
 */
export async function runSeed(file: SeedFile, deps: SeedDeps): Promise<SeedResults> {
  const results: SeedResults = {};
  for (const step of file.steps) {
    let result: StepResult;
    // What the step has created so far, filled in as each of its writes succeeds.
    const partial: StepResult = {};
    try {
      result = await runStep(file, step, resolved(step, results), deps, partial);
    } catch (error) {
      throw new SeedStepError(step, error, results, partial);
    }
    results[step.name] = result;
    deps.done?.(step, result);
  }
  return results;
}

/**
 * The step's fields with every reference replaced by its result: a field that is exactly one
 * reference takes the result as it is (a number stays a number), others are text. Then
 * checked again by the kind's schema, since a result may not fit where it was put.
 */
function resolved(step: SeedStep, results: SeedResults): Record<string, unknown> {
  const lookUp = (text: string): string | number => {
    const [name = '', field = ''] = text.slice(2, -1).split('.');
    const value = results[name]?.[field];
    if (value === undefined) {
      const gave = Object.keys(results[name] ?? {}).join(', ');
      throw new CliError(`${text}: step ${name} has no ${field} (it gave ${gave})`, EXIT.usage);
    }
    return value;
  };
  return Object.fromEntries(
    Object.entries(step.body).map(([field, value]) => {
      if (!hasReference(value)) return [field, value];
      const whole = value.match(REFERENCE);
      if (whole?.length === 1 && whole[0] === value) return [field, lookUp(value)];
      return [field, value.replace(REFERENCE, (text) => String(lookUp(text)))];
    }),
  );
}

function checked<K extends StepKind>(kind: K, body: unknown): StepBody<K> {
  const parsed = STEP_KINDS[kind].safeParse(body);
  if (!parsed.success) {
    throw new CliError(
      `once its references were resolved: ${describeZodError(parsed.error, kind)}`,
      EXIT.usage,
    );
  }
  return parsed.data as StepBody<K>;
}

/** A write that happened but whose answer lacks what the next steps need. */
function unexpected(what: string, status: number): never {
  throw new UnexpectedResponseError(
    status,
    `the ${what} was answered without the documented fields; it may have taken effect`,
  );
}

async function runStep(
  file: SeedFile,
  step: SeedStep,
  raw: Record<string, unknown>,
  deps: SeedDeps,
  /** Where a step of several writes keeps what took effect, should a later write fail. */
  partial: StepResult,
): Promise<StepResult> {
  const took = (fields: StepResult) => Object.assign(partial, fields);
  const admin = <S extends z.ZodType>(
    path: string,
    body: unknown,
    shape: (schemas: Schemas) => S,
  ): Promise<z.output<S>> => {
    // needsAdminToken() has made sure of it before anything was sent.
    if (deps.adminToken === undefined) throw new CliError('no admin token', EXIT.auth);
    return adminPost(deps.client, deps.adminToken, path, body, shape);
  };
  switch (step.kind) {
    case 'agent': {
      const { tier, private_key, key_index, ...fields } = checked('agent', raw);
      const account = agentAccount(file, { private_key, key_index, ...fields });
      const response = await signAndRegister(
        deps.client,
        account,
        { operator_address: account.address, ...fields },
        deps.keptRegistrations,
      ).catch((error: unknown) => {
        // The usual cause: the file has run against this sandbox already.
        if (!(error instanceof ApiError) || error.status !== 409) throw error;
        throw new ApiError(
          409,
          {
            ...error.body,
            error: `${error.message}; a seed file registers its agents anew: run it against a fresh sandbox (a new serve, or one restored to its genesis snapshot)`,
          },
          error.authenticated,
        );
      });
      const apiKey = apiKeyOf(response);
      if (apiKey === undefined) unexpected('registration', response.status);
      // Registered: the key is shown this once, so it is kept should the rest fail.
      took({
        address: account.address,
        agent_id: response.parsed?.agent_id ?? '',
        agent_name: fields.agent_name,
        api_key: apiKey,
        tier: response.parsed?.tier ?? '',
      });
      const agentClient = await deps.clientWithKey(apiKey);
      // The server-side wallet acts for the agent: deposits, strategies and votes come from it.
      const wallet = await agentClient.wallet();
      took({ agent_address: wallet.data.agent_address });
      if (tier !== undefined) {
        await admin(
          '/sandbox/agents/tier',
          { wallet_address: account.address, tier },
          (s) => s.SetTierResponse,
        );
      }
      return {
        address: account.address,
        agent_address: wallet.data.agent_address,
        agent_id: response.parsed?.agent_id ?? '',
        agent_name: fields.agent_name,
        api_key: apiKey,
        tier: tier ?? response.parsed?.tier ?? '',
      };
    }
    case 'fund': {
      const { address, usdc, eth } = checked('fund', raw);
      // The API takes JSON numbers, digit for digit (the schema's exact decimal text).
      const body = {
        address,
        ...(usdc !== undefined && { usdc: exactJsonNumber('usdc', usdc) }),
        ...(eth !== undefined && { eth: exactJsonNumber('eth', eth) }),
      };
      const funded = await admin('/sandbox/fund', body, (s) => s.FundResult);
      return {
        address: funded.address,
        usdc_balance_raw: funded.usdc_balance_raw,
        eth_balance_wei: funded.eth_balance_wei,
      };
    }
    case 'deposit': {
      const { api_key, vault_id, amount_usdc } = checked('deposit', raw);
      const client = await deps.clientWithKey(api_key);
      const response = await client.deposit({ vault_id, amount_usdc: Number(amount_usdc) });
      const deposit = response.parsed ?? unexpected('deposit', response.status);
      return {
        agent_address: deposit.agent_address,
        vault_id,
        vault_address: deposit.vault_address,
        status: deposit.status,
        deposit_tx: deposit.deposit_tx,
        shares_balance: deposit.shares_balance,
        ...(deposit.request_id !== undefined && { request_id: deposit.request_id }),
        ...(deposit.fulfillable_at !== undefined && { fulfillable_at: deposit.fulfillable_at }),
      };
    }
    case 'strategy': {
      const { api_key, status, ...strategy } = checked('strategy', raw);
      const client = await deps.clientWithKey(api_key);
      const response = await client.submitStrategy(strategy);
      const submitted = response.parsed ?? unexpected('strategy submission', response.status);
      let txHash = submitted.tx_hash;
      // Submitted: should a move fail, the strategy and the status it reached are kept.
      took({
        strategy_id: submitted.strategy_id,
        dna_string: submitted.dna_string,
        status: submitted.status,
        tx_hash: txHash,
        agent_address: submitted.agent_address,
      });
      for (const next of status === undefined ? [] : lifecyclePath(status)) {
        const moved = await admin(
          '/sandbox/strategies/status',
          { strategy_id: submitted.strategy_id, status: next },
          (s) => s.StrategyStatusResult,
        );
        txHash = moved.tx_hash;
        took({ status: moved.status, tx_hash: txHash });
      }
      return {
        strategy_id: submitted.strategy_id,
        dna_string: submitted.dna_string,
        status: status ?? submitted.status,
        tx_hash: txHash,
        agent_address: submitted.agent_address,
      };
    }
    case 'strategy_status': {
      const body = checked('strategy_status', raw);
      const moved = await admin('/sandbox/strategies/status', body, (s) => s.StrategyStatusResult);
      return {
        strategy_id: moved.strategy_id,
        previous_status: moved.previous_status,
        status: moved.status,
        tx_hash: moved.tx_hash,
      };
    }
    case 'proposal': {
      const body = checked('proposal', raw);
      const proposal = await admin('/sandbox/proposals', body, (s) => s.CreateProposalResult);
      return { ...proposal };
    }
    case 'vote': {
      const { api_key, proposal_id, support, reason } = checked('vote', raw);
      const client = await deps.clientWithKey(api_key);
      const response = await client.vote({ proposal_id, support: VOTE_SUPPORT[support], reason });
      const { VoteResult } = await import('../../api/schemas/index.ts');
      const vote = VoteResult.safeParse(response.data);
      if (!vote.success) unexpected('vote', response.status);
      return {
        proposal_id,
        support,
        agent_address: vote.data.agent_address,
        tx_hash: vote.data.tx_hash,
      };
    }
    case 'node': {
      const body = checked('node', raw);
      return { ...(await admin('/sandbox/nodes', body, (s) => s.NodeResult)) };
    }
    case 'advance': {
      const body = checked('advance', raw);
      return { ...(await admin('/sandbox/clock/advance', body, (s) => s.ClockState)) };
    }
  }
}
