import { Command } from 'commander';
import { action } from '../action.ts';
import type { Context } from '../context.ts';
import { CliError, EXIT } from '../exit-codes.ts';

/** `agentctl doctor` takes only `--data-url`, which the context reads as `data` does. */
export type DoctorOptions = Record<string, never>;

export function doctorCommand(): Command {
  return new Command('doctor')
    .summary('check the set-up: Node, anvil, config, keystores, profile, service')
    .description(
      'Check what agentctl needs: the Node.js version, anvil (for serve), the configuration ' +
        "and keystores' permissions, the active profile, and that the base URL and data URL " +
        'answer /health (and whether each is a sandbox). Each problem comes with the line that ' +
        'fixes it. Exits 1 when anything is wrong. Never prompts; each network check gives up ' +
        'after 3 s.',
    )
    .option(
      '--data-url <url>',
      "data API URL (env AGENTCTL_DATA_URL; default: the profile's data_url, else the base URL)",
    )
    .addHelpText(
      'after',
      "\nExamples:\n  agentctl doctor\n  agentctl --profile live doctor\n  agentctl --json doctor | jq '.checks[] | select(.ok | not)'",
    )
    .action(action((context) => run({}, context)));
}

export async function run(_options: DoctorOptions, context: Context): Promise<void> {
  const { runChecks } = await import('../doctor/run.ts');
  const checks = await runChecks(context);
  const out = await context.output();
  // A check skipped because of another (keystores, when the config cannot be read) is not ok,
  // but not a problem of its own: the one it depends on is counted.
  const problems = checks.filter((check) => !check.ok && !check.skipped).length;
  if (out.json) {
    out.jsonValue({ ok: checks.every((check) => check.ok), checks });
  } else {
    const { renderChecks } = await import('../doctor/check.ts');
    for (const line of renderChecks(checks, out.colour)) out.print(line);
  }
  if (problems > 0) {
    throw new CliError(
      `doctor found ${problems} problem${problems === 1 ? '' : 's'}`,
      EXIT.failure,
    );
  }
}
