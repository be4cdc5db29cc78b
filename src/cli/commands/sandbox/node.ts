import { Command } from 'commander';
import { action } from '../../action.ts';
import { adminTokenOf, adminWrite } from '../../admin.ts';
import { checkAddress } from '../../args.ts';
import type { Context } from '../../context.ts';

export interface NodeOptions {
  adminToken: string | undefined;
  name: string;
  operator: string;
}

export function nodeCommand(): Command {
  return new Command('node')
    .description(
      "register a node for the data API's Node Operator tier; prints its key once (send it as X-API-Key)",
    )
    .argument('<name>', 'what the node is called in /v1/nodes')
    .argument('<operator>', "the operator's address (0x…)")
    .addHelpText('after', '\nExample:\n  agentctl sandbox node "Research node" 0xOperator')
    .action(
      action((context, command) => {
        const [name, operator] = command.processedArgs as [string, string];
        return run({ adminToken: adminTokenOf(command), name, operator }, context);
      }),
    );
}

/** Registers a node; its key goes to stdout once, and stderr says it will not be shown again. */
export async function run(options: NodeOptions, context: Context): Promise<void> {
  const operator_address = await checkAddress('operator', options.operator);
  const out = await context.output();
  await adminWrite(
    context,
    options.adminToken,
    '/sandbox/nodes',
    { name: options.name, operator_address },
    (s) => s.NodeResult,
    (result) => out.fields(result),
  );
  // Also with --json (a notice): the key cannot be asked for again.
  out.notice(
    'the node key is shown only this once (the sandbox keeps only its hash): save it now; the node sends it as X-API-Key',
  );
}
