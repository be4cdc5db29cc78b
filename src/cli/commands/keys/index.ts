import { Command } from 'commander';
import { keysAddressCommand } from './address.ts';
import { keysImportCommand } from './import.ts';
import { keysListCommand } from './list.ts';
import { keysNewCommand } from './new.ts';
import { keysRemoveCommand } from './remove.ts';

export function keysCommand(): Command {
  return new Command('keys')
    .summary('local encrypted keystores')
    .description(
      'Signing keys, kept as Web3 Secret Storage v3 files (scrypt) in <config dir>/keystores, mode 0600. Passwords come from a hidden prompt, --password-file or AGENTCTL_KEYSTORE_PASSWORD. Private keys and passwords are never printed.',
    )
    .addHelpText(
      'after',
      '\nExamples:\n  agentctl keys new trader\n  agentctl keys list\n  agentctl keys import old --private-key-file ./key.txt',
    )
    .addCommand(keysNewCommand())
    .addCommand(keysImportCommand())
    .addCommand(keysListCommand())
    .addCommand(keysAddressCommand())
    .addCommand(keysRemoveCommand());
}
