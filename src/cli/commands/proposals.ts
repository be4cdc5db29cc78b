import { Command } from 'commander';
import { action } from '../action.ts';
import type { Context } from '../context.ts';
import { timeWithHint } from '../format.ts';
import { showRead } from '../read.ts';

/** `agentctl proposals` takes no options of its own. */
export type ProposalsOptions = Record<string, never>;

export function proposalsCommand(): Command {
  return new Command('proposals')
    .summary('active governance proposals')
    .description(
      'List the governance proposals open for votes: each with its voting window (ISO 8601, with how far from now) and votes so far. The spec leaves their shape open: an answer of another shape is shown field by field.',
    )
    .addHelpText('after', '\nExample:\n  agentctl proposals')
    .action(action((context) => run({}, context)));
}

export async function run(_options: ProposalsOptions, context: Context): Promise<void> {
  const client = await context.client();
  const out = await context.output();
  await showRead(out, client.proposals, [], async (body) => {
    const { ProposalList } = await import('../../api/schemas/index.ts');
    const known = ProposalList.safeParse(body);
    // Another service's shape: every field, as it came.
    if (!known.success) return out.generic(body);
    const { proposals } = known.data;
    if (proposals.length === 0) return out.print('no open proposals');
    const now = context.nowMs();
    proposals.forEach((proposal, i) => {
      if (i > 0) out.print('');
      out.fields({
        proposal: proposal.proposal_id,
        title: proposal.title,
        status: proposal.status,
        proposer: proposal.proposer,
        vote_start: timeWithHint(proposal.vote_start, now),
        vote_end: timeWithHint(proposal.vote_end, now),
        votes: `for ${proposal.votes.for}, against ${proposal.votes.against}, abstain ${proposal.votes.abstain}`,
        description: proposal.description,
      });
    });
  });
}
