import { Argument, Command, Option } from 'commander';
import { completionScript, SHELLS, type Shell } from '../completion.ts';
import { createContext } from '../context.ts';
import { CliError, EXIT } from '../exit-codes.ts';

/** Prints the script for the tree `root()` returns (the whole program, known once built). */
export function completionCommand(root: () => Command): Command {
  return (
    new Command('completion')
      .summary('shell completion script')
      .description(
        'Print a completion script generated from the command tree. The same scripts are in completions/ of the package.',
      )
      .addArgument(new Argument('[shell]', 'the shell').choices(SHELLS))
      // For the scripts themselves: the profile or key names known right now, one per line.
      .addOption(new Option('--values <kind>').choices(['profiles', 'keys']).hideHelp())
      .addHelpText(
        'after',
        // biome-ignore lint/suspicious/noTemplateCurlyInString: shell code
        '\nExamples:\n  source <(agentctl completion bash)\n  agentctl completion zsh > "${fpath[1]}/_agentctl"\n  agentctl completion fish > ~/.config/fish/completions/agentctl.fish',
      )
      .action(async (shell: Shell | undefined, flags: { values?: string }, command: Command) => {
        if (flags.values) {
          const context = createContext(command);
          const names =
            flags.values === 'profiles'
              ? (await context.config()).profileNames()
              : (await context.keystores()).list().map((entry) => entry.name);
          process.stdout.write(names.map((name) => `${name}\n`).join(''));
          return;
        }
        if (!shell) throw new CliError(`give a shell: ${SHELLS.join(', ')}`, EXIT.usage);
        process.stdout.write(completionScript(shell, root()));
      })
  );
}
