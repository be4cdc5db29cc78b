import { Command, Option } from 'commander';
import { type DecimalParts, decimalParts, plainDecimal } from '../../api/schemas/numbers.ts';
import { STRATEGY_STATUSES, TIERS } from '../../api/schemas/values.ts';
import { action } from '../action.ts';
import { checkAddress, decimalText } from '../args.ts';
import type { Context } from '../context.ts';
import { CliError, EXIT } from '../exit-codes.ts';
import { didYouMean } from '../suggest.ts';

/** Calls the sandbox admin API with the token from --admin-token or AGENTCTL_ADMIN_TOKEN. */
async function adminCall(
  context: Context,
  command: Command,
  method: 'GET' | 'POST',
  path: string,
  body?: unknown,
) {
  const token = command.optsWithGlobals<{ adminToken?: string }>().adminToken;
  if (!token) {
    throw new CliError(
      'no admin token: pass --admin-token or set AGENTCTL_ADMIN_TOKEN (agentctl serve prints it at start)',
      EXIT.auth,
    );
  }
  const client = await context.client();
  const out = await context.output();
  const response = await client.sandbox(token, method, path, body);
  if (out.json) return out.raw(response.text);
  out.generic(response.data);
}

/** JSON.rawJSON (Node 21 and later; not yet in TypeScript's lib). */
const { rawJSON } = JSON as unknown as { rawJSON(text: string): unknown };

/**
 * A decimal argument as a JSON number written digit for digit: Number() would round
 * 0.123456789012345678 ETH, which the service takes exactly.
 */
function numberArg(name: string, value: string): unknown {
  const parts = decimalParts(decimalText(name, value)) as DecimalParts;
  // Before writing the digits out: 1e999999 would be a million characters.
  if (parts.digits.length + parts.exponent > 30) {
    throw new CliError(`${name} ${value}: is far too large`, EXIT.usage);
  }
  return rawJSON(plainDecimal(parts));
}

export function sandboxCommand(): Command {
  const sandbox = new Command('sandbox')
    .summary('the sandbox admin API (agentctl serve only)')
    .description(
      "Drive the local sandbox: its clock, tiers, funds, proposals, strategy statuses, the ERC-7540 vault's fulfilment delay and data API nodes.",
    )
    .addHelpText(
      'after',
      '\nExamples:\n  agentctl sandbox advance 86400\n  agentctl sandbox tier 0xYourWallet established',
    )
    .addOption(
      new Option('--admin-token <token>', 'the token serve printed at start').env(
        'AGENTCTL_ADMIN_TOKEN',
      ),
    );
  sandbox
    .command('info')
    .description('chain, contract addresses, clock and state of the sandbox')
    .addHelpText('after', '\nExample:\n  agentctl sandbox info --json')
    .action(action((context, command) => adminCall(context, command, 'GET', '/sandbox/info')));
  sandbox
    .command('advance')
    .description('move the sandbox clock (and chain time) forward')
    .argument('<seconds>', 'an integer, for example 86400 for a day')
    .addHelpText('after', '\nExample:\n  agentctl sandbox advance 86400')
    .action(
      action(async (context, command) => {
        const seconds = command.processedArgs[0] as string;
        if (!/^\d+$/.test(seconds) || Number(seconds) === 0) {
          throw new CliError(
            `seconds ${seconds}: the sandbox clock only moves forward; give a whole number of seconds, at least 1 (86400 is a day)`,
            EXIT.usage,
          );
        }
        await adminCall(context, command, 'POST', '/sandbox/clock/advance', {
          seconds: Number(seconds),
        });
      }),
    );
  sandbox
    .command('tier')
    .description("set an agent's tier")
    .argument('<wallet>', "the agent's registered wallet")
    .argument('<tier>', TIERS.join(' | '))
    .addHelpText('after', '\nExample:\n  agentctl sandbox tier 0xYourWallet established')
    .action(
      action(async (context, command) => {
        const [wallet, tierArg] = command.processedArgs as [string, string];
        const tier = tierArg.toLowerCase();
        if (!(TIERS as readonly string[]).includes(tier)) {
          throw new CliError(
            `tier ${tierArg}: must be one of ${TIERS.join(', ')}${didYouMean(tier, TIERS)}`,
            EXIT.usage,
          );
        }
        await adminCall(context, command, 'POST', '/sandbox/agents/tier', {
          wallet_address: await checkAddress('wallet', wallet),
          tier,
        });
      }),
    );
  sandbox
    .command('fund')
    .description('mint test USDC and send ETH to an address')
    .argument('<address>', 'the address to fund')
    .option('--usdc <amount>', 'USDC to mint')
    .option('--eth <amount>', 'ETH to send')
    .addHelpText('after', '\nExample:\n  agentctl sandbox fund 0xAgentWallet --usdc 5000 --eth 1')
    .action(
      action(async (context, command) => {
        const address = await checkAddress('address', command.processedArgs[0] as string);
        const { usdc, eth } = command.opts<{ usdc?: string; eth?: string }>();
        if (usdc === undefined && eth === undefined) {
          throw new CliError('give --usdc, --eth or both', EXIT.usage);
        }
        await adminCall(context, command, 'POST', '/sandbox/fund', {
          address,
          ...(usdc !== undefined ? { usdc: numberArg('--usdc', usdc) } : {}),
          ...(eth !== undefined ? { eth: numberArg('--eth', eth) } : {}),
        });
      }),
    );
  sandbox
    .command('proposal')
    .description('open a governance proposal for votes')
    .argument('<title>', 'the title')
    .option('--description <text>', 'the description')
    .addHelpText('after', '\nExample:\n  agentctl sandbox proposal "Raise the conservative APY"')
    .action(
      action(async (context, command) => {
        const { description } = command.opts<{ description?: string }>();
        await adminCall(context, command, 'POST', '/sandbox/proposals', {
          title: command.processedArgs[0],
          ...(description !== undefined ? { description } : {}),
        });
      }),
    );
  sandbox
    .command('strategy-status')
    .description('move a strategy along its lifecycle')
    .argument('<strategy-id>', 'the 0x… id')
    .argument('<status>', STRATEGY_STATUSES.join(' | '))
    .addHelpText('after', '\nExample:\n  agentctl sandbox strategy-status 0x… guardian_review')
    .action(
      action(async (context, command) => {
        const [strategyId, status] = command.processedArgs as [string, string];
        await adminCall(context, command, 'POST', '/sandbox/strategies/status', {
          strategy_id: strategyId,
          status,
        });
      }),
    );
  sandbox
    .command('fulfillment-delay')
    .description(
      'set how long the ERC-7540 vault (configurable) waits before fulfilling a request, in sandbox seconds',
    )
    .argument('<seconds>', 'a whole number, 0 or more (default 3600)')
    .addHelpText('after', '\nExample:\n  agentctl sandbox fulfillment-delay 60')
    .action(
      action(async (context, command) => {
        const seconds = command.processedArgs[0] as string;
        if (!/^\d+$/.test(seconds)) {
          throw new CliError(
            `seconds ${seconds}: give a whole number of seconds, 0 or more`,
            EXIT.usage,
          );
        }
        await adminCall(context, command, 'POST', '/sandbox/vaults/fulfillment-delay', {
          vault_id: 'configurable',
          seconds: Number(seconds),
        });
      }),
    );
  sandbox
    .command('node')
    .description(
      "register a node for the data API's Node Operator tier; prints its key once (send it as X-API-Key)",
    )
    .argument('<name>', 'what the node is called in /v1/nodes')
    .argument('<operator>', "the operator's address (0x…)")
    .addHelpText('after', '\nExample:\n  agentctl sandbox node "Research node" 0xOperator')
    .action(
      action(async (context, command) => {
        const [name, operator] = command.processedArgs as [string, string];
        await adminCall(context, command, 'POST', '/sandbox/nodes', {
          name,
          operator_address: await checkAddress('operator', operator),
        });
      }),
    );
  return sandbox;
}
