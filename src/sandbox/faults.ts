/**
 * Crash points for the durability tests, which cannot reach them any other way:
 * AGENTCTL_SANDBOX_FAULT names one, and the process kills itself (kill -9) there.
 *   crash-after-commit        a block and the rows of the writes in it are committed, and
 *                             nothing has been answered yet
 *   crash-before-onboarding   an agent is registered (and answered), its wallet not yet funded
 *   crash-before-checkpoint   a checkpoint's temp file is written, not yet renamed
 *   crash-in-checkpoint       a checkpoint file is in place, the database not yet told
 *   crash-before-restore      a restore has stopped the chain, and changed nothing yet
 *   crash-in-restore          a restore has said on disk which snapshot it puts in place,
 *                             and put nothing in place yet
 */
export function crashAt(point: string): void {
  if (process.env.AGENTCTL_SANDBOX_FAULT === point) process.kill(process.pid, 'SIGKILL');
}
