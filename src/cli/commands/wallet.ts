import { Command } from 'commander';
import { action } from '../action.ts';

export function walletCommand(): Command {
  return new Command('wallet')
    .summary("the agent's server-side wallet")
    .description("Show the agent's server-side wallet: address, network, ETH and USDC balances.")
    .addHelpText('after', '\nExample:\n  agentctl wallet')
    .action(
      action(async (context) => {
        const client = await context.authenticatedClient();
        const out = await context.output();
        if (out.json) return out.raw((await client.wallet.asReceived()).text);
        const response = await client.wallet();
        out.generic(response.data);
      }),
    );
}

export function eligibilityCommand(): Command {
  return new Command('eligibility')
    .summary('campaign eligibility')
    .description('Show whether the agent is eligible for the campaign, criterion by criterion.')
    .addHelpText('after', '\nExample:\n  agentctl eligibility --json')
    .action(
      action(async (context) => {
        const response = await (await context.authenticatedClient()).eligibility();
        const out = await context.output();
        if (out.json) return out.raw(response.text);
        out.generic(response.data);
      }),
    );
}

export function faucetCommand(): Command {
  return new Command('faucet')
    .summary('request testnet ETH for the agent wallet')
    .description(
      "Ask the faucet for testnet ETH for the agent's wallet. During the cooldown (typically 24 hours) it exits 5 and says when to come back.",
    )
    .addHelpText('after', '\nExample:\n  agentctl faucet')
    .action(
      action(async (context) => {
        const client = await context.authenticatedClient();
        const out = await context.output();
        const response = await out.progress('waiting for the drip to confirm', () =>
          client.faucet(),
        );
        if (out.json) return out.raw(response.text);
        out.print(
          `received ${response.data.drip_amount_eth} ETH (${response.data.drip_amount_wei} wei) in ${response.data.agent_address}`,
        );
        out.print(`tx ${response.data.tx_hash}`);
      }),
    );
}
