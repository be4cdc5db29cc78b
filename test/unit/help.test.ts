import type { Command } from 'commander';
import { describe, expect, it } from 'vitest';
import { buildProgram } from '../../src/cli/main.ts';

function allCommands(command: Command): Command[] {
  return [command, ...command.commands.flatMap(allCommands)];
}

function helpOf(command: Command): string {
  let text = '';
  command.configureOutput({
    writeOut: (chunk) => (text += chunk),
    writeErr: (chunk) => (text += chunk),
  });
  command.outputHelp();
  return text;
}

describe('help', () => {
  const commands = allCommands(buildProgram()).filter((command) => command.name() !== 'agentctl');

  it.each(commands.map((command) => [command.name(), command] as const))(
    '%s has an example and a description',
    (_name, command) => {
      const help = helpOf(command);
      expect(help).toMatch(/\nExamples?:\n {2}.*agentctl /);
      expect(command.description() || command.summary()).not.toBe('');
    },
  );
});
