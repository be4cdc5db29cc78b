import { describe, expect, it } from 'vitest';
import { ApiError } from '../../src/api/errors.ts';
import { describeFailure } from '../../src/cli/errors.ts';
import { SeedStepError } from '../../src/cli/seed/run.ts';
import {
  describeSeedProblems,
  lifecyclePath,
  needsAdminToken,
  SeedFileSchema,
} from '../../src/cli/seed/schema.ts';

/** The seed file's checks, which run before anything is sent (no service needed). */
const PHRASE = 'host ice drive clinic gesture curve inspire couch connect exit submit advice';

/** `${step.field}`, as a seed file writes a reference. */
const ref = (name: string) => `\${${name}}`;

const problems = (file: unknown) => {
  const parsed = SeedFileSchema.safeParse(file);
  if (parsed.success) return [];
  return describeSeedProblems(parsed.error, file);
};

describe('seed file schema', () => {
  it('fills in key indices: key_index, else the place among the agents that derive keys', () => {
    const parsed = SeedFileSchema.parse({
      version: 1,
      seed_phrase: `  ${PHRASE.replaceAll(' ', '   ')} `,
      steps: [
        { name: 'a', agent: { agent_name: 'Agent A' } },
        { name: 'b', agent: { agent_name: 'Agent B', private_key: `0x${'1'.repeat(64)}` } },
        { name: 'c', agent: { agent_name: 'Agent C', key_index: 9 } },
        { name: 'd', agent: { agent_name: 'Agent D' } },
      ],
    });
    expect(parsed.seed_phrase).toBe(PHRASE);
    expect(parsed.steps.map((step) => step.body.key_index)).toEqual([0, undefined, 9, 2]);
  });

  it('refuses the envelope and the keys with every problem named', () => {
    expect(problems({ version: 2, steps: [], seed: PHRASE })).toEqual([
      'seed: unknown field (did you mean seed_phrase?); fields: version, seed_phrase, steps',
      'version: must be 1 (the seed file format this agentctl reads)',
      'steps: must hold at least one step',
    ]);
    expect(
      problems({ steps: [{ name: 'a', agent: { agent_name: 'A' } }], seed_phrase: 'one two' }),
    ).toEqual([
      'version: must be 1 (the seed file format this agentctl reads)',
      'seed_phrase: must be a BIP-39 mnemonic (12 to 24 English words with a valid checksum)',
      'step a (steps[0]) agent.agent_name: must be 3 to 100 characters',
    ]);
    expect(problems([])).toEqual(['file: must be a JSON object: {"version": 1, "steps": [...]}']);
    expect(
      problems({
        version: 1,
        seed_phrase: 'not a mnemonic at all',
        steps: [
          { name: 'a', agent: { agent_name: 'Agent A', key_index: 2 } },
          { name: 'b', agent: { agent_name: 'Agent B', key_index: 2 } },
          {
            name: 'c',
            agent: { agent_name: 'Agent C', key_index: 3, private_key: `0x${'1'.repeat(64)}` },
          },
        ],
      }),
    ).toEqual([
      'seed_phrase: must be a BIP-39 mnemonic (12 to 24 English words with a valid checksum)',
      'step b (steps[1]) agent.key_index: 2 is the key index of step a too',
      'step c (steps[2]) agent.key_index: give private_key or key_index, not both',
    ]);
    expect(
      problems({
        version: 1,
        seed_phrase: PHRASE,
        steps: [
          { name: 'a', agent: { agent_name: 'Agent A', key_index: 2 } },
          { name: 'b', agent: { agent_name: 'Agent B', key_index: 2 } },
          {
            name: 'c',
            agent: { agent_name: 'Agent C', key_index: 3, private_key: `0x${'1'.repeat(64)}` },
          },
          { name: '9lives', advance: { seconds: 0 }, node: { name: 'n' } },
        ],
      }),
    ).toEqual([
      'step b (steps[1]) agent.key_index: 2 is the key index of step a too',
      'step c (steps[2]) agent.key_index: give private_key or key_index, not both',
      'step 9lives (steps[3]) name: must be 1 to 64 of A-Z a-z 0-9 _ -, starting with a letter or _',
      'step 9lives (steps[3]): has advance and node; a step does one thing',
    ]);
  });

  it('checks references for their form, their step (an earlier one) and its results', () => {
    expect(
      problems({
        version: 1,
        steps: [
          {
            name: 'p',
            proposal: { title: 'T', description: `see ${ref('later.node_key')} and ${ref('p')}` },
          },
          { name: 'later', node: { name: 'n', operator_address: ref('p.proposal_id') } },
        ],
      }),
    ).toEqual([
      `step p (steps[0]) proposal.description: ${ref('later.node_key')}: no earlier step is named later`,
      `step p (steps[0]) proposal.description: ${ref('p')}: a reference is ${ref('step.field')}, for example ${ref('alice.api_key')}`,
    ]);
  });

  it('walks a strategy along the pipeline; paused and deprecated are one move', () => {
    expect(lifecyclePath('shadow')).toEqual([]);
    expect(lifecyclePath('live')).toEqual([
      'guardian_review',
      'paper_trading',
      'pending_oracle_approval',
      'live',
    ]);
    expect(lifecyclePath('paused')).toEqual(['paused']);
  });

  it('asks for the admin token only for steps that use the admin API', () => {
    const step = (kind: string, body: Record<string, unknown> = {}) =>
      needsAdminToken({ name: 's', kind: kind as 'agent', body });
    expect(step('agent')).toBe(false);
    expect(step('agent', { tier: 'established' })).toBe(true);
    expect(step('deposit')).toBe(false);
    expect(step('strategy')).toBe(false);
    expect(step('strategy', { status: 'live' })).toBe(true);
    expect(step('vote')).toBe(false);
    expect(step('advance')).toBe(true);
  });
});

describe('a failing step', () => {
  it("keeps its cause's exit code and names the step, also in the --json error", () => {
    const cause = new ApiError(409, { error: 'wallet already registered' }, false);
    const failure = describeFailure(
      new SeedStepError({ name: 'alice', kind: 'agent', body: {} }, cause, {}),
    );
    expect(failure).toEqual({
      exitCode: 2,
      message: 'step alice (agent) failed: 409: wallet already registered',
      json: {
        error: 'step alice (agent) failed: wallet already registered',
        status: 409,
        code: 'conflict',
        step: 'alice',
      },
    });
  });

  it('says what of the step took effect, and hands it over marked incomplete', () => {
    const cause = new ApiError(401, { error: 'invalid admin token' }, true);
    const error = new SeedStepError(
      { name: 'alice', kind: 'agent', body: {} },
      cause,
      { p: { proposal_id: 1 } },
      { address: '0xA11CE', api_key: 'key', tier: 'unverified' },
    );
    expect(error.results).toEqual({
      p: { proposal_id: 1 },
      alice: { address: '0xA11CE', api_key: 'key', tier: 'unverified', complete: false },
    });
    const failure = describeFailure(error);
    const part =
      '; before it failed, it registered 0xA11CE (tier unverified): in the map as alice, with "complete": false';
    expect(failure.message).toBe(`step alice (agent) failed: 401: invalid admin token${part}`);
    expect(failure.json).toMatchObject({
      error: `step alice (agent) failed: invalid admin token${part}`,
      step: 'alice',
      took_effect: 'registered 0xA11CE (tier unverified)',
    });
  });
});
