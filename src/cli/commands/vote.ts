import { Command } from 'commander';
import { VOTE_SUPPORT } from '../../api/schemas/values.ts';
import { action } from '../action.ts';
import { CliError, EXIT } from '../exit-codes.ts';

export function voteCommand(): Command {
  return new Command('vote')
    .summary('vote on a governance proposal')
    .description('Cast a vote from the agent wallet. Needs tier established or higher.')
    .argument('<proposal-id>', 'the proposal id (an integer)')
    .argument('<support>', 'for | against | abstain')
    .option('--reason <text>', 'why, recorded onchain with the vote')
    .addHelpText('after', '\nExample:\n  agentctl vote 3 for --reason "more yield for everyone"')
    .action(
      action(async (context, command) => {
        const [id, support] = command.processedArgs as [string, string];
        if (!Object.hasOwn(VOTE_SUPPORT, support)) {
          throw new CliError(`support ${support}: must be for, against or abstain`, EXIT.usage);
        }
        if (!/^\d+$/.test(id))
          throw new CliError(`proposal id ${id}: must be an integer`, EXIT.usage);
        const { VoteRequest, describeZodError } = await import('../../api/schemas/index.ts');
        const body = {
          proposal_id: Number(id),
          support: VOTE_SUPPORT[support as keyof typeof VOTE_SUPPORT],
          ...(command.opts().reason !== undefined
            ? { reason: command.opts().reason as string }
            : {}),
        };
        const parsed = VoteRequest.safeParse(body);
        if (!parsed.success) throw new CliError(describeZodError(parsed.error, 'vote'), EXIT.usage);
        const client = await context.authenticatedClient();
        const out = await context.output();
        const response = await out.progress('waiting for the vote to confirm', () =>
          client.vote(body),
        );
        out.writeResult(response, (result) => out.generic(result));
      }),
    );
}
