import { Command } from 'commander';
import { action } from '../../action.ts';
import type { Context } from '../../context.ts';

/** `agentctl config path` takes no options of its own. */
export type ConfigPathOptions = Record<string, never>;

export function configPathCommand(): Command {
  return new Command('path')
    .description('print where the configuration file is')
    .addHelpText('after', '\nExample:\n  agentctl config path')
    .action(action((context) => run({}, context)));
}

export async function run(_options: ConfigPathOptions, context: Context): Promise<void> {
  const config = await context.config();
  const out = await context.output();
  if (out.json) return out.jsonValue({ path: config.path, keystores: config.keystoreDir });
  out.print(config.path);
}
