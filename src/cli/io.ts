import { Chalk, type ChalkInstance } from 'chalk';

// canPrompt lives in tty.ts: it is needed at start-up, chalk is not.
export { canPrompt } from './tty.ts';

/**
 * Colour: off with --no-color or NO_COLOR; forced with FORCE_COLOR; otherwise on when
 * stdout is a terminal. Nothing else about the output depends on the terminal.
 */
export function colours(
  wanted: boolean,
  env: NodeJS.ProcessEnv = process.env,
  stdout: { isTTY?: boolean } = process.stdout,
): ChalkInstance {
  if (!wanted || (env.NO_COLOR !== undefined && env.NO_COLOR !== ''))
    return new Chalk({ level: 0 });
  const forced = env.FORCE_COLOR;
  if (forced !== undefined) {
    if (forced === 'false' || forced === '0') return new Chalk({ level: 0 });
    const level = forced === '' || forced === 'true' ? 1 : Number(forced);
    return new Chalk({
      level: Number.isInteger(level) ? (Math.min(3, Math.max(0, level)) as 0 | 1 | 2 | 3) : 1,
    });
  }
  return new Chalk({ level: stdout.isTTY ? 2 : 0 });
}
