import { Argument, Command, Option } from 'commander';
import { action } from '../action.ts';
import { completionScript, SHELLS, type Shell } from '../completion.ts';
import type { Context } from '../context.ts';
import { CliError, EXIT } from '../exit-codes.ts';

/** `agentctl completion [shell]`, or the scripts' own `--values profiles|keys`. */
export interface CompletionOptions {
  shell?: Shell | undefined;
  /** For the scripts themselves: the profile or key names known right now, one per line. */
  values?: 'profiles' | 'keys' | undefined;
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
    .addOption(new Option('--values <kind>').choices(['profiles', 'keys']).hideHelp())
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
        : (await context.keystores()).list().map((entry) => entry.name);
    if (names.length > 0) out.print(names.join('\n'));
    return;
  }
  if (!options.shell) throw new CliError(`give a shell: ${SHELLS.join(', ')}`, EXIT.usage);
  out.print(completionScript(options.shell, options.program()));
}
