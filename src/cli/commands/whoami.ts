import { Command } from 'commander';
import { action } from '../action.ts';
import type { Context } from '../context.ts';
import { CliError, EXIT } from '../exit-codes.ts';
import { timeWithHint } from '../format.ts';

/** `agentctl whoami` takes no options of its own. */
export type WhoamiOptions = Record<string, never>;

export function whoamiCommand(): Command {
  return new Command('whoami')
    .summary("registration lookup of the profile's wallet")
    .description(
      "Look up the registration of the profile's wallet (set by `agentctl register`), and show the agent's server-side wallet: the registered wallet signs the registration; the server-side wallet, which the service holds, sends deposits, strategies and votes.",
    )
    .addHelpText('after', '\nExample:\n  agentctl --profile live whoami')
    .action(action((context) => run({}, context)));
}

export async function run(_options: WhoamiOptions, context: Context): Promise<void> {
  const profile = await context.profile();
  if (!profile.wallet_address) {
    throw new CliError(
      `profile "${context.profileName}" has no wallet: run \`agentctl register\` (or \`agentctl config set wallet_address\`)`,
      EXIT.usage,
    );
  }
  const client = await context.client();
  const out = await context.output();
  if (out.json) return out.raw((await client.lookup.asReceived(profile.wallet_address)).text);
  const response = await client.lookup(profile.wallet_address);
  // The agent acts from its server-side wallet: show it too, when the key can ask.
  const agentWallet = (await client.hasApiKey())
    ? await client.wallet().then(
        (answer) => answer.data.agent_address,
        () => undefined,
      )
    : undefined;
  const registration = response.data;
  out.fields({
    profile: context.profileName,
    service: client.baseUrl,
    wallet: `${profile.wallet_address} (registered; signs the registration)`,
    ...(agentWallet && {
      agent_wallet: `${agentWallet} (server-side; deposits, strategies, votes, faucet)`,
    }),
    ...registration,
    // After the other answers: the hint is relative to the service's clock they carried.
    ...(registration.registered && { created_at: createdAt(registration.created_at, context) }),
  });
}

/** The registration time with a relative hint; text that is no date is shown as sent. */
function createdAt(text: string, context: Context): string {
  const ms = Date.parse(text);
  return Number.isNaN(ms) ? text : timeWithHint(Math.floor(ms / 1000), context.nowMs());
}
