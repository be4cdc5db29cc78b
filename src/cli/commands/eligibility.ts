import { Command } from 'commander';
import { action } from '../action.ts';
import type { Context } from '../context.ts';
import { clip, TABLE_WIDTH, wideOption, wrapText } from '../format.ts';
import { showRead } from '../read.ts';

/** `agentctl eligibility [--wide]`. */
export interface EligibilityOptions {
  /** Criterion ids whole, and each description on one line. */
  wide?: boolean | undefined;
}

export function eligibilityCommand(): Command {
  return new Command('eligibility')
    .summary('campaign eligibility')
    .description('Show whether the agent is eligible for the campaign, criterion by criterion.')
    .addOption(wideOption())
    .addHelpText('after', '\nExample:\n  agentctl eligibility --json')
    .action(
      action((context, command) => run({ wide: command.opts<EligibilityOptions>().wide }, context)),
    );
}

export async function run(options: EligibilityOptions, context: Context): Promise<void> {
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
    const ids = eligibility.criteria.map((criterion) =>
      options.wide ? criterion.id : clip(criterion.id, 24),
    );
    // Within 80 columns the description wraps in what the other columns leave (borders and
    // padding take 10).
    const idWidth = Math.max('criterion'.length, ...ids.map((id) => [...id].length));
    const descriptionWidth = TABLE_WIDTH - 10 - 'met'.length - idWidth;
    out.table(
      ['met', 'criterion', 'description'],
      eligibility.criteria.map((criterion, i) => [
        criterion.met ? 'yes' : 'no',
        ids[i],
        options.wide
          ? criterion.description
          : wrapText(criterion.description, descriptionWidth).join('\n'),
      ]),
    );
  });
}
