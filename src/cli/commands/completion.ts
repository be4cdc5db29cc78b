import { Argument, Command, Option } from 'commander';
import { action } from '../action.ts';
import { completionScript, DYNAMIC_VALUES, SHELLS, type Shell } from '../completion.ts';
import type { Context } from '../context.ts';
import { CliError, EXIT } from '../exit-codes.ts';

/** `agentctl completion [shell]`, or the scripts' own `--values profiles|keys|snapshots`. */
export interface CompletionOptions {
  shell?: Shell | undefined;
  /**
   * For the scripts themselves: the profile, key or snapshot names known right now, one per
   * line. Never a failure: what cannot be known is left out.
   */
  values?: (typeof DYNAMIC_VALUES)[number] | undefined;
  /** The tree to describe: the whole program, known once built. */
  program: () => Command;
}

/** Prints the script for the tree `root()` returns. */
export function completionCommand(root: () => Command): Command {
  return new Command('completion')
    .summary('shell completion script')
    .description(
      'Print a completion script generated from the command tree. The same scripts are in completions/ of the package.',
    )
    .addArgument(new Argument('[shell]', 'the shell').choices(SHELLS))
    .addOption(new Option('--values <kind>').choices(DYNAMIC_VALUES).hideHelp())
    .addHelpText(
      'after',
      // biome-ignore lint/suspicious/noTemplateCurlyInString: shell code
      '\nExamples:\n  source <(agentctl completion bash)\n  agentctl completion zsh > "${fpath[1]}/_agentctl"\n  agentctl completion fish > ~/.config/fish/completions/agentctl.fish',
    )
    .action(
      action((context, command) => {
        const [shell] = command.processedArgs as [Shell | undefined];
        const { values } = command.opts<Pick<CompletionOptions, 'values'>>();
        return run({ shell, values, program: root }, context);
      }),
    );
}

export async function run(options: CompletionOptions, context: Context): Promise<void> {
  const out = await context.output();
  if (options.values) {
    const names =
      options.values === 'profiles'
        ? (await context.config()).profileNames()
        : options.values === 'keys'
          ? (await context.keystores()).list().map((entry) => entry.name)
          : await snapshotNames(context);
    if (names.length > 0) out.print(names.join('\n'));
    return;
  }
  if (!options.shell) throw new CliError(`give a shell: ${SHELLS.join(', ')}`, EXIT.usage);
  out.print(completionScript(options.shell, options.program()));
}

/** A shell waits for its completion: the snapshot names come within this, or not at all. */
const SNAPSHOT_NAMES_BUDGET_MS = 1000;

/**
 * The sandbox's snapshot names, asked of the service the context names (--base-url,
 * AGENTCTL_BASE_URL, the profile) with AGENTCTL_ADMIN_TOKEN. Nothing, and nothing said, when
 * there is no token or no answer within a second: a completion never prints errors.
 */
async function snapshotNames(context: Context): Promise<string[]> {
  const token = context.env.AGENTCTL_ADMIN_TOKEN;
  if (!token) return [];
  try {
    const { createApiClient } = await import('../../api/client.ts');
    const { VERSION } = await import('../../version.ts');
    const client = createApiClient({
      baseUrl: await context.baseUrl(),
      userAgent: `agentctl/${VERSION}`,
      timeoutMs: SNAPSHOT_NAMES_BUDGET_MS,
      retryBudgetMs: SNAPSHOT_NAMES_BUDGET_MS,
    });
    try {
      const { data } = await client.snapshots.list(token);
      return data.snapshots.map((snapshot) => snapshot.name);
    } finally {
      await client.close();
    }
  } catch {
    return [];
  }
}
