import { CliError, EXIT } from './exit-codes.ts';
import { canPrompt } from './io.ts';

/** Asks yes or no on the terminal. Loads inquirer only when a prompt is really shown. */
export async function confirm(message: string): Promise<boolean> {
  const { confirm: ask } = await import('@inquirer/prompts');
  return ask({ message, default: false });
}

/**
 * Asks before a write, unless --yes was given or no one is at a terminal (a script has
 * already decided). A "no" is a cancellation (exit 130).
 */
export async function confirmUnlessYes(message: string, yes: boolean | undefined): Promise<void> {
  if (yes || !canPrompt()) return;
  if (!(await confirm(message))) throw new CliError('cancelled', EXIT.cancelled);
}
