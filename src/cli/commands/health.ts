import { Command } from 'commander';
import { action } from '../action.ts';
import type { Context } from '../context.ts';
import { CliError, EXIT } from '../exit-codes.ts';

/** `agentctl health` takes no options of its own. */
export type HealthOptions = Record<string, never>;

/** Status words that mean healthy (the sandbox says "ok"; other services say these). */
const HEALTHY = new Set(['ok', 'healthy', 'up', 'pass']);

export function healthCommand(): Command {
  return new Command('health')
    .summary('service health')
    .description(
      'Show the service health: status, version, chain and RPC connection. Exits 1 when the service is not healthy (degraded, or its RPC is not connected).',
    )
    .addHelpText('after', '\nExample:\n  agentctl health --json')
    .action(action((context) => run({}, context)));
}

/**
 * Not showRead: the answer is checked against the contract even with --json, since the exit
 * code depends on its fields (scripts gate on it).
 */
export async function run(_options: HealthOptions, context: Context): Promise<void> {
  const response = await (await context.client()).health();
  const out = await context.output();
  if (out.json) out.raw(response.text);
  else out.fields(response.data);
  const { status, rpc_connected, reason } = response.data;
  if (!HEALTHY.has(status.toLowerCase()) || rpc_connected === false) {
    const why = reason ?? (rpc_connected === false ? 'its chain RPC is not connected' : '');
    throw new CliError(`the service is ${status}${why ? ` (${why})` : ''}`, EXIT.failure);
  }
}
