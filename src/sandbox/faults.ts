/**
 * Crash points for the durability tests, which cannot reach them any other way:
 * AGENTCTL_SANDBOX_FAULT names one, and the process kills itself (kill -9) there, the first
 * time it gets there, or the Nth time with `NAME:N` (`crash-after-commit:2`: the second
 * commit of writes, say, once the first was an agent's onboarding).
 *   crash-after-commit        a block and the rows of the writes in it are committed, and
 *                             nothing has been answered yet
 *   crash-before-onboarding   an agent is registered (and answered), its wallet not yet funded
 *   crash-before-checkpoint   a checkpoint's temp file is written, not yet renamed
 *   crash-in-checkpoint       a checkpoint file is in place, the database not yet told
 *   crash-before-restore      a restore has stopped the chain, and changed nothing yet
 *   crash-in-restore          a restore has said on disk which snapshot it puts in place,
 *                             and put nothing in place yet
 *   crash-after-restore       a restore is done (the chain is back), and not yet answered
 */
export function crashAt(point: string): void {
  const fault = process.env.AGENTCTL_SANDBOX_FAULT;
  if (fault === undefined) return;
  const [name, nth = '1'] = fault.split(':');
  if (name !== point) return;
  hits++;
  if (hits === Number(nth)) process.kill(process.pid, 'SIGKILL');
}

/** Times the process got to the crash point AGENTCTL_SANDBOX_FAULT names (one point a run). */
let hits = 0;
