import { readFileSync, statSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { Command } from 'commander';
import { writeFileAtomically } from '../../../files/atomic.ts';
import { action } from '../../action.ts';
import { adminTokenOf, requireAdminToken } from '../../admin.ts';
import type { Context } from '../../context.ts';
import { CliError, EXIT } from '../../exit-codes.ts';

export interface SeedOptions {
  adminToken: string | undefined;
  file: string;
  /** Where the map of results goes (mode 0600) instead of stdout. */
  out: string | undefined;
}

/** A seed file larger than this is a mistake (a log, a binary), not a scenario. */
const MAX_SEED_BYTES = 1024 * 1024;

export function seedCommand(): Command {
  return new Command('seed')
    .description(
      'create a scenario from a seed file: agents (keys given or derived from its seed phrase), deposits, strategies, proposals, votes, nodes and clock advances, in order; prints a JSON map of what it created (API keys included: a secret)',
    )
    .argument('<file>', 'the seed file (JSON); see "Seed files" in the README')
    .option('--out <file>', 'write the map to FILE (mode 0600) instead of stdout')
    .addHelpText(
      'after',
      '\nEvery problem of the file is reported before anything is sent. A failing step\nstops the run: the message names it, the exit code is its error\'s, and the\nsteps before it are in the map (their API keys are not shown again); so is\nwhat the failed step created before it failed, marked "complete": false.\n\nIts writes are keyed KEY:1, KEY:2, … in the order they are sent, KEY being\n--idempotency-key (else a new UUID). Run again with the same key after a run\nthat failed, the writes that ran are answered as they were (the signed\nregistrations of its agents are kept until the run is done, and sent again).\n\nExamples:\n  agentctl sandbox seed examples/seed.json\n  agentctl sandbox seed examples/seed.json --out seeded.json\n  jq -r .alice.api_key seeded.json',
    )
    .action(
      action((context, command) =>
        run(
          {
            adminToken: adminTokenOf(command),
            file: command.processedArgs[0] as string,
            out: command.opts<{ out?: string }>().out,
          },
          context,
        ),
      ),
    );
}

/** 255 (the most a key may have) less ":N" for up to 99,999 writes. */
const MAX_SEED_KEY_LENGTH = 249;

/** The file as JSON, refused with a usage error that names it. */
function readSeedFile(file: string): unknown {
  const refuse = (why: string) => new CliError(`${file}: ${why}`, EXIT.usage);
  let text: string;
  try {
    const stats = statSync(file);
    if (stats.isDirectory()) throw refuse('is a directory; give a seed file (JSON)');
    if (stats.size > MAX_SEED_BYTES)
      throw refuse(`is ${stats.size} bytes; a seed file is at most 1 MiB`);
    text = readFileSync(file, 'utf8');
  } catch (error) {
    if (error instanceof CliError) throw error;
    const code = (error as NodeJS.ErrnoException).code;
    throw refuse(
      code === 'ENOENT' ? 'no such file' : `cannot read it (${code ?? (error as Error).message})`,
    );
  }
  try {
    return JSON.parse(text);
  } catch (error) {
    const where = /line (\d+) column (\d+)/.exec((error as Error).message);
    throw refuse(`not valid JSON${where ? ` (line ${where[1]}, column ${where[2]})` : ''}`);
  }
}

export async function run(options: SeedOptions, context: Context): Promise<void> {
  const input = readSeedFile(options.file);
  const { SeedFileSchema, describeSeedProblems, needsAdminToken } = await import(
    '../../seed/schema.ts'
  );
  const parsed = SeedFileSchema.safeParse(input);
  if (!parsed.success) {
    const problems = describeSeedProblems(parsed.error, input);
    throw new CliError(
      `${options.file}: ${problems.length === 1 ? '1 problem' : `${problems.length} problems`}; nothing was sent\n  ${problems.join('\n  ')}`,
      EXIT.usage,
    );
  }
  const file = parsed.data;
  // Before anything is sent: a run that would stop at its first admin step is refused whole.
  const adminToken = file.steps.some(needsAdminToken)
    ? requireAdminToken(options.adminToken)
    : options.adminToken;
  const out = options.out === undefined ? undefined : resolve(options.out);
  if (out !== undefined) {
    const dir = dirname(out);
    let isDir = false;
    try {
      isDir = statSync(dir).isDirectory();
    } catch {}
    if (!isDir) throw new CliError(`--out ${options.out}: no directory ${dir}`, EXIT.usage);
  }

  // Its writes are keyed `${base}:1`, `${base}:2`, … in order: the same run made again with
  // --idempotency-key base sends the same keys, and the service answers those that ran.
  const base = context.numberWriteKeys();
  if (base.length > MAX_SEED_KEY_LENGTH) {
    throw new CliError(
      `--idempotency-key: a seed run's key is at most ${MAX_SEED_KEY_LENGTH} characters (it has ${base.length}): each write's key adds ":N" to it`,
      EXIT.usage,
    );
  }
  const output = await context.output();
  const { describeResult, runSeed, SeedStepError } = await import('../../seed/run.ts');
  /** The map: to --out (stdout then says where), else to stdout. */
  const hand = (results: Record<string, unknown>, complete: boolean) => {
    if (out === undefined) {
      output.print(output.json ? JSON.stringify(results) : JSON.stringify(results, null, 2));
      output.info('the map holds API keys: --out FILE keeps them out of logs');
      return;
    }
    writeFileAtomically(out, `${JSON.stringify(results, null, 2)}\n`);
    const steps = Object.keys(results).length;
    if (output.json) output.jsonValue({ out, steps: Object.keys(results), complete });
    else output.print(`wrote the results of ${steps} step${steps === 1 ? '' : 's'} to ${out}`);
    output.info('it holds API keys: keep it private (mode 0600)');
  };
  let results: Record<string, unknown>;
  // Its agents' signed registrations are kept until the run is done: should a later step's
  // outcome be unknown, the run made again with its key sends each again, answered as it was.
  const registered: Array<() => void> = [];
  try {
    results = await runSeed(file, {
      client: await context.client(),
      clientWithKey: (apiKey) => context.clientWithKey(apiKey),
      adminToken,
      keptRegistrations: {
        ...(await context.keptRegistrations()),
        keepAnswered: (forget) => registered.push(forget),
      },
      done: (step, result) => output.info(`${step.name}: ${describeResult(step.kind, result)}`),
    });
  } catch (error) {
    // What ran before the failure is real, and its API keys are shown only once: the failed
    // step too when part of it took effect (marked "complete": false).
    if (error instanceof SeedStepError && Object.keys(error.results).length > 0) {
      hand(error.results, false);
    }
    throw error;
  }
  for (const forget of registered) forget();
  hand(results, true);
}
