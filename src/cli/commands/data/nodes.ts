import { Command } from 'commander';
import { action } from '../../action.ts';
import type { Context } from '../../context.ts';
import { clip, wideOption } from '../../format.ts';
import { showRead } from '../../read.ts';
import { timeCell, timeText } from './shared.ts';

export interface DataNodesOptions {
  wide?: boolean;
}

export function nodesCommand(): Command {
  return new Command('nodes')
    .description('the chain nodes: the sandbox’s own, and registered ones')
    .addOption(wideOption())
    .addHelpText('after', '\nExample:\n  agentctl data nodes')
    .action(action((context, command) => run(command.opts<DataNodesOptions>(), context)));
}

export async function run(options: DataNodesOptions, context: Context): Promise<void> {
  const client = await context.dataClient();
  const out = await context.output();
  await showRead(out, client.data.nodes, [], (body) => {
    const now = context.nowMs();
    if (options.wide) {
      return out.table(
        ['name', 'status', 'block', 'latency ms', 'last seen', 'version', 'operator', 'id'],
        body.nodes.map((node) => [
          node.name,
          node.status,
          node.blockNumber ?? '',
          node.latencyMs ?? '',
          timeText(node.lastSeen, now),
          node.version ?? '',
          node.operator,
          node.id,
        ]),
      );
    }
    out.table(
      ['name', 'status', 'block', 'last seen'],
      body.nodes.map((node) => [
        clip(node.name, 22),
        node.latencyMs === null
          ? node.status
          : `${node.status}\n${Number(node.latencyMs.toFixed(1))} ms`,
        node.blockNumber ?? '',
        timeCell(node.lastSeen, now),
      ]),
    );
  });
}
