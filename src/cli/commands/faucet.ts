import { Command } from 'commander';
import { action } from '../action.ts';
import type { Context } from '../context.ts';
import { CliError, EXIT } from '../exit-codes.ts';
import { timeWithHint } from '../format.ts';

/** `agentctl faucet` takes no options of its own. */
export type FaucetOptions = Record<string, never>;

export function faucetCommand(): Command {
  return new Command('faucet')
    .summary('request testnet ETH for the agent wallet')
    .description(
      "Ask the faucet for testnet ETH for the agent's wallet. During the cooldown (typically 24 hours) it exits 5 and says when to come back.",
    )
    .addHelpText('after', '\nExample:\n  agentctl faucet')
    .action(action((context) => run({}, context)));
}

export async function run(_options: FaucetOptions, context: Context): Promise<void> {
  const client = await context.authenticatedClient();
  const out = await context.output();
  let response: Awaited<ReturnType<typeof client.faucet>>;
  try {
    response = await out.progress('waiting for the drip to confirm', () => client.faucet());
  } catch (error) {
    // With --json the cooldown's body goes out as received (it carries the next time).
    const { ApiError } = await import('../../api/errors.ts');
    if (out.json || !(error instanceof ApiError) || !error.isCooldown) throw error;
    const next = Number(error.body.next_eligible_timestamp);
    throw new CliError(
      `the faucet is cooling down for this agent: ask again after ${timeWithHint(next, context.nowMs())}`,
      EXIT.rateLimited,
      'cooldown',
    );
  }
  if (out.json) return out.raw(response.text);
  // The wallet and the hash on lines of their own: with the amount they exceed 80 columns.
  out.print(
    `received ${response.data.drip_amount_eth} ETH (${response.data.drip_amount_wei} wei) in the agent wallet`,
  );
  out.fields({ wallet: response.data.agent_address, tx: response.data.tx_hash });
}
