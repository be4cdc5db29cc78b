import { Command } from 'commander';
import { action } from '../action.ts';
import { CliError, EXIT } from '../exit-codes.ts';

/** Status words that mean healthy (the sandbox says "ok"; other services say these). */
const HEALTHY = new Set(['ok', 'healthy', 'up', 'pass']);

export function healthCommand(): Command {
  return new Command('health')
    .summary('service health')
    .description(
      'Show the service health: status, version, chain and RPC connection. Exits 1 when the service is not healthy (degraded, or its RPC is not connected).',
    )
    .addHelpText('after', '\nExample:\n  agentctl health --json')
    .action(
      action(async (context) => {
        const response = await (await context.client()).health();
        const out = await context.output();
        if (out.json) out.raw(response.text);
        else out.fields(response.data);
        // Scripts gate on the exit code: anything but a healthy answer fails them.
        const { status, rpc_connected, reason } = response.data;
        if (!HEALTHY.has(status.toLowerCase()) || rpc_connected === false) {
          const why = reason ?? (rpc_connected === false ? 'its chain RPC is not connected' : '');
          throw new CliError(`the service is ${status}${why ? ` (${why})` : ''}`, EXIT.failure);
        }
      }),
    );
}
