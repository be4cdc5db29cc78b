import type { Colour } from '../output.ts';

/**
 * One check of `agentctl doctor`: what was found (`detail`), and for a problem the one line
 * that fixes it (`fix`: a command to run, a chmod, a flag). Checks may add facts of their own
 * for scripts (`path`, `version`, `url`, `sandbox`, …), shown in `--json` only.
 */
export interface Check {
  name: string;
  ok: boolean;
  /**
   * Not checked, because an earlier check failed (keystores and profile need the config file):
   * not ok, but not a problem of its own (no fix; not counted among the problems).
   */
  skipped?: true;
  detail: string;
  fix?: string;
  [fact: string]: unknown;
}

export function passed(name: string, detail: string, facts: Record<string, unknown> = {}): Check {
  return { name, ok: true, detail, ...facts };
}

/** A check that could not be made: `detail` says why (`not checked: see config`). */
export function skipped(name: string, detail: string, facts: Record<string, unknown> = {}): Check {
  return { name, ok: false, skipped: true, detail, ...facts };
}

export function problem(
  name: string,
  detail: string,
  fix: string,
  facts: Record<string, unknown> = {},
): Check {
  return { name, ok: false, detail, fix, ...facts };
}

/**
 * The checks for a terminal: one line each (`ok`, `problem` or `skipped`, the name, what was found),
 * and under a problem the line that fixes it.
 *
 *   ok       node      Node.js 24.11.1 (22.22.2 or newer is needed)
 *   problem  anvil     not found: …
 *                      fix: npm install @foundry-rs/anvil-linux-amd64@1.7.1 …
 */
export function renderChecks(checks: readonly Check[], colour: Colour): string[] {
  const width = Math.max(...checks.map((check) => check.name.length));
  const indent = ' '.repeat('problem  '.length + width + 2);
  return checks.flatMap((check) => {
    const state = check.ok ? 'ok     ' : check.skipped ? 'skipped' : colour.yellow('problem');
    const line = `${state}  ${check.name.padEnd(width)}  ${check.detail}`;
    return check.ok || !check.fix ? [line] : [line, `${indent}${colour.bold('fix:')} ${check.fix}`];
  });
}
