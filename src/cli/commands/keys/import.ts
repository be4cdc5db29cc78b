import { Command } from 'commander';
import { action } from '../../action.ts';
import type { Context } from '../../context.ts';
import { CliError, EXIT } from '../../exit-codes.ts';
import { hiddenPrompt, newKeystorePassword } from '../../prompts.ts';
import { canPrompt } from '../../tty.ts';

export interface KeysImportOptions {
  name: string;
  privateKeyFile?: string;
  passwordFile?: string;
}

export function keysImportCommand(): Command {
  return new Command('import')
    .description('store an existing private key encrypted')
    .argument('<name>', 'the keystore name')
    .option(
      '--private-key-file <file>',
      'read the private key from FILE (else a hidden prompt, else AGENTCTL_PRIVATE_KEY)',
    )
    .option('--password-file <file>', 'read the password from the first line of FILE')
    .addHelpText(
      'after',
      '\nExample:\n  agentctl keys import trader   # asks for the key and a password',
    )
    .action(
      action((context, command) =>
        run(
          {
            name: command.processedArgs[0] as string,
            ...command.opts<Omit<KeysImportOptions, 'name'>>(),
          },
          context,
        ),
      ),
    );
}

export async function run(options: KeysImportOptions, context: Context): Promise<void> {
  const { name } = options;
  const store = await context.keystores();
  store.pathOf(name);
  if (store.exists(name)) {
    throw new CliError(`a key named ${name} already exists; choose another name`, EXIT.usage);
  }
  let raw: string | undefined;
  if (options.privateKeyFile) {
    const { readOptionFile } = await import('../../../keystore/files.ts');
    raw = readOptionFile(
      '--private-key-file',
      options.privateKeyFile,
      'the private key (64 hex digits, 0x optional)',
    ).trim();
  } else if (canPrompt()) {
    raw = await hiddenPrompt()?.('Private key (hex)');
  } else {
    raw = context.env.AGENTCTL_PRIVATE_KEY;
  }
  const key = raw?.trim().replace(/^0x/, '');
  if (!key || !/^[0-9a-fA-F]{64}$/.test(key)) {
    throw new CliError(
      raw
        ? 'the private key must be 32 bytes: 64 hex digits, 0x optional'
        : 'no private key: use --private-key-file, a terminal, or AGENTCTL_PRIVATE_KEY',
      EXIT.usage,
    );
  }
  const password = await newKeystorePassword(context.env, options.passwordFile);
  const out = await context.output();
  // scrypt takes a second or two: say what is happening.
  const entry = await out.progress('encrypting the key', () =>
    store.create(name, Buffer.from(key, 'hex'), password),
  );
  if (out.json) return out.jsonValue(entry);
  out.print(`imported key ${entry.name}: ${entry.address}`);
  out.info(`keystore: ${entry.path}`);
}
