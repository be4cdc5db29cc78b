import { Argument, Command } from 'commander';
import { completionScript, SHELLS, type Shell } from '../completion.ts';

/** Prints the script for the tree `root()` returns (the whole program, known once built). */
export function completionCommand(root: () => Command): Command {
  return new Command('completion')
    .summary('shell completion script')
    .description(
      'Print a completion script generated from the command tree. The same scripts are in completions/ of the package.',
    )
    .addArgument(new Argument('<shell>', 'the shell').choices(SHELLS))
    .addHelpText(
      'after',
      // biome-ignore lint/suspicious/noTemplateCurlyInString: shell code
      '\nExamples:\n  source <(agentctl completion bash)\n  agentctl completion zsh > "${fpath[1]}/_agentctl"\n  agentctl completion fish > ~/.config/fish/completions/agentctl.fish',
    )
    .action((shell: Shell) => {
      process.stdout.write(completionScript(shell, root()));
    });
}
