import { CliError, EXIT } from './exit-codes.ts';
import type { TextPromptConfig } from './text-prompt.ts';
import { canPrompt } from './tty.ts';

/**
 * One line of text on the terminal, each answer checked as it is given; a refused one is
 * cleared with its reason shown, and Enter on an empty answer takes the default.
 */
export async function askText(config: TextPromptConfig): Promise<string> {
  const { textPrompt } = await import('./text-prompt.ts');
  return textPrompt(config);
}

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

/** A hidden prompt (a password or a private key), or undefined when prompting is not allowed. */
export function hiddenPrompt(): ((message: string) => Promise<string>) | undefined {
  if (!canPrompt()) return undefined;
  return async (message) => {
    const { password } = await import('@inquirer/prompts');
    return password({ message, mask: '*' });
  };
}

/** A new password, typed twice. */
export async function askNewPassword(): Promise<string> {
  const { password } = await import('@inquirer/prompts');
  for (;;) {
    const first = await password({
      message: 'New keystore password',
      mask: '*',
      validate: (value) => value.length >= 8 || 'at least 8 characters',
    });
    const again = await password({ message: 'Repeat the password', mask: '*' });
    if (first === again) return first;
    process.stderr.write('The passwords differ; try again.\n');
  }
}

/**
 * The password for a new keystore: --password-file, AGENTCTL_KEYSTORE_PASSWORD, or typed
 * twice on a terminal; at least 8 characters.
 */
export async function newKeystorePassword(
  env: NodeJS.ProcessEnv,
  passwordFile: string | undefined,
): Promise<string> {
  const { keystorePassword } = await import('../keystore/signer.ts');
  const password = await keystorePassword(
    { env, passwordFile, askPassword: canPrompt() ? () => askNewPassword() : undefined },
    'New keystore password',
  );
  if (password.length < 8) {
    throw new CliError('the keystore password must be at least 8 characters', EXIT.usage);
  }
  return password;
}
