import type { Command } from 'commander';
import { describe, expect, it } from 'vitest';
import { buildProgram } from '../../src/cli/main.ts';

/** Every command's --help, as an 80-column terminal (or a pipe) shows it: within 80 columns. */

function allCommands(command: Command): Command[] {
  return [command, ...command.commands.flatMap(allCommands)];
}

function path(command: Command): string {
  const names: string[] = [];
  for (let at: Command | null = command; at; at = at.parent) names.unshift(at.name());
  return names.join(' ');
}

/** The help text with the text added after it (examples, environment, exit codes). */
function helpOf(command: Command): string {
  let text = '';
  command.configureOutput({
    writeOut: (chunk) => (text += chunk),
    writeErr: (chunk) => (text += chunk),
    getOutHelpWidth: () => 80,
    getErrHelpWidth: () => 80,
  });
  command.outputHelp();
  return text;
}

describe('--help fits 80 columns', () => {
  const commands = allCommands(buildProgram());

  it.each(commands.map((command) => [path(command), command] as const))('%s', (_path, command) => {
    const wide = helpOf(command)
      .split('\n')
      .filter((line) => line.length > 80);
    expect(wide).toEqual([]);
  });
});
