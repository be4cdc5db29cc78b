import type { Command } from 'commander';
import { describe, expect, it } from 'vitest';
import { buildProgram, namedCommand } from '../../src/cli/main.ts';

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

describe('a run builds only the command it names', () => {
  const names = buildProgram().commands.map((command) => command.name());

  it.each(names)('%s alone, under the same global options', (name) => {
    const program = buildProgram(name);
    expect(program.commands.map((command) => command.name())).toEqual([name]);
    expect(program.options.map((option) => option.long)).toEqual(
      buildProgram().options.map((option) => option.long),
    );
  });

  it('finds the command after global options and their values', () => {
    expect(namedCommand(['vaults', '--json'])).toBe('vaults');
    expect(namedCommand(['--json', '--base-url', 'http://x', 'vaults'])).toBe('vaults');
    expect(namedCommand(['--profile', 'vaults', 'deposit', 'moderate', '1'])).toBe('deposit');
    expect(namedCommand(['--api-key=agk_x', '-q', 'strategy', 'list'])).toBe('strategy');
    expect(namedCommand(['-qv', '--no-color', 'health'])).toBe('health');
  });

  it('builds the whole tree for help, a typo, or nothing', () => {
    for (const args of [
      [],
      ['--help'],
      ['-h', 'vaults'],
      ['-qh', 'vaults'],
      ['--unknown', 'vaults'],
      ['vault'],
      ['help', 'vaults'],
      ['--'],
    ]) {
      expect(namedCommand(args), args.join(' ')).toBeUndefined();
    }
  });
});
