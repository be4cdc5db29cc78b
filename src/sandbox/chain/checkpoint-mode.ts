/**
 * AGENTCTL_CHECKPOINTS=manual: no automatic checkpoints, only POST /sandbox/checkpoint and a
 * graceful shutdown's (tests and the bench arrange a long log with it; see
 * docs/state-directory.md). Unset (or empty): automatic checkpoints.
 */
export const CHECKPOINTS_ENV = 'AGENTCTL_CHECKPOINTS';

/**
 * Whether the sandbox takes checkpoints by itself; undefined when the variable holds something
 * other than `manual`, which `serve` refuses at start rather than ignore.
 */
export function automaticCheckpoints(env: NodeJS.ProcessEnv = process.env): boolean | undefined {
  const mode = env[CHECKPOINTS_ENV];
  if (mode === undefined || mode === '') return true;
  return mode === 'manual' ? false : undefined;
}
