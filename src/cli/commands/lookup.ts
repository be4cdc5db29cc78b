import { Command } from 'commander';
import { action } from '../action.ts';
import { checkAddress } from '../args.ts';
import type { Context } from '../context.ts';
import { timeWithHint } from '../format.ts';
import { showRead } from '../read.ts';

/** `agentctl lookup <wallet>`, as typed. */
export interface LookupOptions {
  wallet: string;
}

export function lookupCommand(): Command {
  return new Command('lookup')
    .summary('registration lookup of a wallet')
    .description('Show whether a wallet is registered as an agent, and its public record.')
    .argument('<wallet>', 'the wallet address (0x…)')
    .addHelpText(
      'after',
      '\nExample:\n  agentctl lookup 0x000000000000000000000000000000000000dEaD',
    )
    .action(
      action((context, command) => run({ wallet: command.processedArgs[0] as string }, context)),
    );
}

export async function run(options: LookupOptions, context: Context): Promise<void> {
  const wallet = await checkAddress('wallet', options.wallet);
  const client = await context.client();
  const out = await context.output();
  await showRead(out, client.lookup, [wallet], (record) => {
    if (!record.registered) return out.print(`${wallet} is not registered`);
    out.fields({ ...record, created_at: timeText(record.created_at, context.nowMs()) });
  });
}

/** The service's ISO time as timeWithHint shows it (whole seconds, a relative hint). */
function timeText(iso: string, nowMs: number): string {
  const ms = Date.parse(iso);
  return Number.isNaN(ms) ? iso : timeWithHint(Math.floor(ms / 1000), nowMs);
}
