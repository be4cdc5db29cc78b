import { Command } from 'commander';
import { action } from '../action.ts';
import type { Context } from '../context.ts';
import { amountWithRaw, clip, rawWithAmount, shortAddress, wideOption } from '../format.ts';
import { showRead } from '../read.ts';

/** `agentctl wallet [--wide]`. */
export interface WalletOptions {
  /** The positions' names, raw amounts and addresses whole. */
  wide?: boolean | undefined;
}

export function walletCommand(): Command {
  return new Command('wallet')
    .summary("the agent's server-side wallet")
    .description(
      "Show the agent's server-side wallet: address, network, ETH and USDC balances, and its vault positions.",
    )
    .addOption(wideOption())
    .addHelpText('after', '\nExample:\n  agentctl wallet')
    .action(
      action((context, command) => run({ wide: command.opts<WalletOptions>().wide }, context)),
    );
}

/** Wei as ETH, exactly: "1.5 ETH (1500000000000000000 wei)". */
function ethWithWei(eth: string, wei: string): string {
  return `${eth} ETH (${wei} wei)`;
}

export async function run(options: WalletOptions, context: Context): Promise<void> {
  const client = await context.authenticatedClient();
  const out = await context.output();
  await showRead(out, client.wallet, [], (wallet) => {
    out.fields({
      address: wallet.agent_address,
      network: `${wallet.network} (chain id ${wallet.chain_id})`,
      ETH: ethWithWei(wallet.eth_balance, wallet.eth_balance_wei),
      gas: wallet.has_gas ? 'enough for transactions' : 'too little ETH: run `agentctl faucet`',
      USDC: rawWithAmount(wallet.usdc_balance_raw, 'USDC'),
      ...(wallet.protocol_token_balance !== undefined && {
        'protocol token': `${wallet.protocol_token_balance} tokens`,
      }),
      ...(!wallet.configured && { configured: 'no: the service has no wallet for this agent' }),
    });
    if (wallet.positions === undefined) return;
    if (wallet.positions.length === 0) return out.print('positions: none');
    out.print(out.colour.bold('positions'));
    if (options.wide) {
      return out.table(
        ['vault', 'name', 'shares', 'value', 'address'],
        wallet.positions.map((position) => [
          position.vault_id,
          position.vault_name,
          amountWithRaw(position.shares, 'shares'),
          amountWithRaw(position.value_usdc),
          position.vault_address,
        ]),
      );
    }
    out.table(
      ['vault', 'shares', 'value', 'address'],
      wallet.positions.map((position) => [
        position.vault_id ?? clip(position.vault_name, 14),
        `${position.shares} shares`,
        `${position.value_usdc} USDC`,
        shortAddress(position.vault_address),
      ]),
    );
  });
}
