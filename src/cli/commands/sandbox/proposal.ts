import { Command } from 'commander';
import { action } from '../../action.ts';
import { adminTokenOf, adminWrite } from '../../admin.ts';
import type { Context } from '../../context.ts';
import { timeWithHint } from '../../format.ts';

export interface ProposalOptions {
  adminToken: string | undefined;
  title: string;
  description: string | undefined;
}

export function proposalCommand(): Command {
  return new Command('proposal')
    .description('open a governance proposal for votes')
    .argument('<title>', 'the title')
    .option('--description <text>', 'the description')
    .addHelpText('after', '\nExample:\n  agentctl sandbox proposal "Raise the conservative APY"')
    .action(
      action((context, command) =>
        run(
          {
            adminToken: adminTokenOf(command),
            title: command.processedArgs[0] as string,
            description: command.opts<{ description?: string }>().description,
          },
          context,
        ),
      ),
    );
}

/** Opens a proposal; its vote end as ISO 8601 with how far off it is (by the sandbox's clock). */
export async function run(options: ProposalOptions, context: Context): Promise<void> {
  const out = await context.output();
  await adminWrite(
    context,
    options.adminToken,
    '/sandbox/proposals',
    {
      title: options.title,
      ...(options.description !== undefined ? { description: options.description } : {}),
    },
    (s) => s.CreateProposalResult,
    (result) => out.fields({ ...result, vote_end: timeWithHint(result.vote_end, context.nowMs()) }),
  );
}
