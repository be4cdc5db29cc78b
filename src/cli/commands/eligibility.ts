import { Command } from 'commander';
import { action } from '../action.ts';
import type { Context } from '../context.ts';
import { showRead } from '../read.ts';

/** `agentctl eligibility` takes no options of its own. */
export type EligibilityOptions = Record<string, never>;

export function eligibilityCommand(): Command {
  return new Command('eligibility')
    .summary('campaign eligibility')
    .description('Show whether the agent is eligible for the campaign, criterion by criterion.')
    .addHelpText('after', '\nExample:\n  agentctl eligibility --json')
    .action(action((context) => run({}, context)));
}

export async function run(_options: EligibilityOptions, context: Context): Promise<void> {
  const client = await context.authenticatedClient();
  const out = await context.output();
  // The spec leaves the shape open: the sandbox's is rendered, any other shown as sent.
  await showRead(out, client.eligibility, [], async (body) => {
    const { Eligibility } = await import('../../api/schemas/index.ts');
    const parsed = Eligibility.safeParse(body);
    if (!parsed.success) return out.generic(body);
    const eligibility = parsed.data;
    out.fields({
      campaign: eligibility.campaign,
      wallet: eligibility.agent_address,
      eligible: eligibility.eligible ? 'yes' : 'no: not every criterion is met',
    });
    out.table(
      ['met', 'criterion', 'description'],
      eligibility.criteria.map((criterion) => [
        criterion.met ? 'yes' : 'no',
        criterion.id,
        criterion.description,
      ]),
    );
  });
}
