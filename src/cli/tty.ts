/**
 * May we prompt? Only with a person at a terminal: stdin and stdout are TTYs and `CI` is
 * not set. This is the only place the rule lives; without a prompt, missing input is a
 * usage error that names the flags, never a hang.
 */
export function canPrompt(
  env: NodeJS.ProcessEnv = process.env,
  stdin: { isTTY?: boolean } = process.stdin,
  stdout: { isTTY?: boolean } = process.stdout,
): boolean {
  return Boolean(stdin.isTTY && stdout.isTTY) && !env.CI;
}
