import { Command } from 'commander';
import { VOTE_SUPPORT } from '../../api/schemas/values.ts';
import { action } from '../action.ts';
import type { Context } from '../context.ts';
import { CliError, EXIT } from '../exit-codes.ts';

/** `agentctl vote <proposal-id> <support> [--reason]`, as typed. */
export interface VoteOptions {
  proposalId: string;
  support: string;
  reason?: string | undefined;
}

export function voteCommand(): Command {
  return new Command('vote')
    .summary('vote on a governance proposal')
    .description('Cast a vote from the agent wallet. Needs tier established or higher.')
    .argument('<proposal-id>', 'the proposal id (an integer)')
    .argument('<support>', 'for | against | abstain')
    .option('--reason <text>', 'why, recorded onchain with the vote')
    .addHelpText('after', '\nExample:\n  agentctl vote 3 for --reason "more yield for everyone"')
    .action(
      action((context, command) => {
        const [proposalId, support] = command.processedArgs as [string, string];
        return run({ proposalId, support, reason: command.opts().reason }, context);
      }),
    );
}

export async function run(options: VoteOptions, context: Context): Promise<void> {
  const { proposalId, support } = options;
  if (!Object.hasOwn(VOTE_SUPPORT, support)) {
    throw new CliError(`support ${support}: must be for, against or abstain`, EXIT.usage);
  }
  if (!/^\d+$/.test(proposalId)) {
    throw new CliError(`proposal id ${proposalId}: must be an integer`, EXIT.usage);
  }
  const { VoteRequest, describeZodError } = await import('../../api/schemas/index.ts');
  const body = {
    proposal_id: Number(proposalId),
    support: VOTE_SUPPORT[support as keyof typeof VOTE_SUPPORT],
    ...(options.reason !== undefined && { reason: options.reason }),
  };
  const parsed = VoteRequest.safeParse(body);
  if (!parsed.success) throw new CliError(describeZodError(parsed.error, 'vote'), EXIT.usage);
  const client = await context.authenticatedClient();
  const out = await context.output();
  const response = await out.progress('waiting for the vote to confirm', () => client.vote(body));
  out.writeResult(response, (result) => out.generic(result));
}
